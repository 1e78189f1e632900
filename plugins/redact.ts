// Removes secret values, and the encodings a remote might echo them in, from
// anything that comes back through the gateway: base64 (also of a longer text
// such as "Bearer <secret>", at any alignment), URL and form encoding, JSON
// string escaping (once or twice), HTML escaping and hex.

const REDACTED = "[redacted]";
/** Shorter values would redact ordinary words. */
const MIN_LENGTH = 6;

const BASE64URL: Record<string, string> = { "+": "-", "/": "_" };

function base64(bytes: Uint8Array): string {
  let binary = "";
  for (const b of bytes) binary += String.fromCharCode(b);
  return btoa(binary);
}

/**
 * The base64 characters that depend only on the secret, for each of the three
 * positions it may start at inside a longer encoded text: whatever comes
 * before or after it ("Bearer ", a JSON body), these characters appear.
 */
function base64Cores(bytes: Uint8Array): string[] {
  const cores: string[] = [];
  for (let offset = 0; offset < 3; offset++) {
    const padded = new Uint8Array(offset + bytes.length);
    padded.set(bytes, offset);
    const encoded = base64(padded);
    // Character i holds bits 6i…6i+5: it depends only on the secret when those bits lie within its bytes.
    const first = Math.ceil((offset * 8) / 6);
    const last = Math.floor(((offset + bytes.length) * 8) / 6) - 1;
    const core = encoded.slice(first, last + 1);
    cores.push(core, core.replace(/[+/]/g, (c) => BASE64URL[c]!));
  }
  return cores;
}

function jsonEscaped(text: string): string {
  return JSON.stringify(text).slice(1, -1);
}

/** JSON escaping as encoders that keep output ASCII write it (Python's json.dumps, for one). */
function asciiJsonEscaped(text: string): string {
  return jsonEscaped(text).replace(/[\u007f-\uffff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`);
}

function htmlEscaped(text: string): string {
  return text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;").replace(/'/g, "&#39;");
}

function encodings(secret: string): string[] {
  const bytes = new TextEncoder().encode(secret);
  const hex = [...bytes].map((b) => b.toString(16).padStart(2, "0")).join("");
  const url = encodeURIComponent(secret);
  const json = jsonEscaped(secret);
  return [
    secret,
    ...base64Cores(bytes),
    url,
    url.replace(/%[0-9A-F]{2}/g, (e) => e.toLowerCase()),
    new URLSearchParams({ v: secret }).toString().slice(2),
    json,
    json.replaceAll("/", "\\/"),
    asciiJsonEscaped(secret),
    jsonEscaped(json),
    htmlEscaped(secret),
    hex,
    hex.toUpperCase(),
  ];
}

export class Redactor {
  private readonly needles: string[];

  constructor(secrets: string[]) {
    const all = secrets.filter((s) => s.length >= MIN_LENGTH).flatMap(encodings);
    // Longest first, so a value inside a longer encoding is not half-replaced.
    this.needles = [...new Set(all)].filter((n) => n.length >= MIN_LENGTH).sort((a, b) => b.length - a.length);
  }

  redact(text: string): string {
    let out = text;
    for (const needle of this.needles) out = out.split(needle).join(REDACTED);
    return out;
  }

  /**
   * A JSON value with secrets redacted inside its strings. A secret found in
   * a string is replaced within it; one that would span the JSON's own
   * punctuation makes the text invalid, and this throws rather than keep it.
   */
  redactJson<T>(value: T): T {
    return JSON.parse(this.redact(JSON.stringify(value))) as T;
  }
}

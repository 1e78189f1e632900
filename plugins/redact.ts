// Removes secret values, and the encodings a remote might echo them in, from
// anything that comes back through the gateway: base64 (also of a longer text
// such as "Bearer <secret>", at any alignment), URL and form encoding, JSON
// string escaping (once or twice) and hex; in each, any character may come as
// an HTML character reference (`&#115;`, `&#x73;`, `&amp;`), and the whole may
// be split across lines (wrapped base64, a value broken for display).
import { toBase64 } from "../lib/base64.ts";

const REDACTED = "[redacted]";
/** Shorter values would redact ordinary words. */
const MIN_LENGTH = 6;

const BASE64URL: Record<string, string> = { "+": "-", "/": "_" };

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
    const encoded = toBase64(padded);
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

/** The named references HTML escaping uses; any other character is matched by number. */
const NAMED_REFERENCES: Record<string, string> = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&apos;" };

/** Between two characters of an encoded secret: nothing, or one line break (raw or JSON-escaped) with the blanks around it. */
const LINE_BREAK = String.raw`(?:[ \t]*(?:\r\n|\r|\n|\\r\\n|\\n)[ \t]*)?`;

/** A character as itself or as an HTML character reference: decimal or hex (either case, leading zeros), or named. */
function characterPattern(char: string): string {
  const code = char.codePointAt(0)!;
  const hex = code.toString(16).replace(/[a-f]/g, (digit) => `[${digit}${digit.toUpperCase()}]`);
  const forms = [char.replace(/[\\^$.*+?()[\]{}|/-]/g, "\\$&"), `&#0*${code};`, `&#[xX]0*${hex};`];
  const named = NAMED_REFERENCES[char];
  if (named) forms.push(named);
  return `(?:${forms.join("|")})`;
}

/** Where an encoded secret may appear: each character in any of its forms, a line break allowed between any two. */
function needlePattern(needle: string): RegExp {
  return new RegExp([...needle].map(characterPattern).join(LINE_BREAK), "g");
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
    hex,
    hex.toUpperCase(),
  ];
}

interface Needle {
  /** The length of the encoding it finds. */
  length: number;
  pattern: RegExp;
}

/** Each secret's needles, made once per isolate: a gateway (and its redactor) is made for every pass. */
const needlesBySecret = new Map<string, Needle[]>();

function needlesOf(secret: string): Needle[] {
  let needles = needlesBySecret.get(secret);
  if (!needles) {
    needles = [...new Set(encodings(secret))].filter((n) => n.length >= MIN_LENGTH).map((n) => ({ length: n.length, pattern: needlePattern(n) }));
    needlesBySecret.set(secret, needles);
  }
  return needles;
}

export class Redactor {
  private readonly needles: RegExp[];

  constructor(secrets: string[]) {
    const needles = [...new Set(secrets)].filter((s) => s.length >= MIN_LENGTH).flatMap(needlesOf);
    // Longest first, so a value inside a longer encoding is not half-replaced.
    this.needles = needles.sort((a, b) => b.length - a.length).map((n) => n.pattern);
  }

  redact(text: string): string {
    let out = text;
    for (const needle of this.needles) out = out.replace(needle, REDACTED);
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

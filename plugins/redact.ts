// Removes secret values, and the simple encodings a remote might echo them
// in, from anything that comes back through the gateway.

const REDACTED = "[redacted]";
/** Shorter values would redact ordinary words. */
const MIN_LENGTH = 6;

function encodings(secret: string): string[] {
  const bytes = new TextEncoder().encode(secret);
  let binary = "";
  for (const b of bytes) binary += String.fromCharCode(b);
  const base64 = btoa(binary);
  const hex = [...bytes].map((b) => b.toString(16).padStart(2, "0")).join("");
  return [
    secret,
    base64,
    base64.replace(/=+$/, ""),
    base64.replaceAll("+", "-").replaceAll("/", "_").replace(/=+$/, ""),
    encodeURIComponent(secret),
    JSON.stringify(secret).slice(1, -1),
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
}

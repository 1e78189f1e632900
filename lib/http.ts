// Shared request hygiene for every route: a bad request gets a 4xx that says
// what was wrong, before anything is written.
import type { Context } from "hono";

export class HttpError extends Error {
  constructor(
    readonly status: 400 | 401 | 403 | 404 | 409 | 413 | 415 | 422 | 429 | 503,
    message: string,
    /** Said as Retry-After (a 429's). */
    readonly retryAfterSeconds?: number,
  ) {
    super(message);
  }
}

/** The token of `Authorization: Bearer <token>` (the scheme in any case, RFC 9110), or undefined. */
export function bearerToken(authorization: string | undefined): string | undefined {
  return /^Bearer +(\S.*)$/i.exec(authorization ?? "")?.[1];
}

export interface BodyRules {
  /** Accepted media types (the part before ";"). */
  contentTypes: string[];
  maxBytes: number;
}

/** The body's media type (the part before ";", lower case), or "" when it says none. */
export function mediaType(c: Context): string {
  return (c.req.header("content-type") ?? "").split(";")[0]!.trim().toLowerCase();
}

/** Reads the raw body's bytes within the rules (a form with files is binary). */
export async function readBodyBytes(c: Context, rules: BodyRules): Promise<Uint8Array> {
  const type = mediaType(c);
  if (!rules.contentTypes.includes(type)) {
    throw new HttpError(415, `content-type must be ${rules.contentTypes.join(" or ")}, got "${type || "none"}"`);
  }
  const declared = Number(c.req.header("content-length") ?? "0");
  if (declared > rules.maxBytes) throw new HttpError(413, `body is ${declared} bytes; the limit is ${rules.maxBytes}`);
  if (!c.req.raw.body) return new Uint8Array();
  return readAtMost(c.req.raw.body, rules.maxBytes, () => new HttpError(413, `body exceeds the limit of ${rules.maxBytes} bytes`));
}

/** Reads the raw body (signatures are computed over it) within the rules, as UTF-8 text. */
export async function readBody(c: Context, rules: BodyRules): Promise<string> {
  const bytes = await readBodyBytes(c, rules);
  try {
    return new TextDecoder("utf-8", { fatal: true, ignoreBOM: false }).decode(bytes);
  } catch {
    throw new HttpError(400, "body is not valid UTF-8");
  }
}

/** A Retry-After header's wait in ms (seconds, or an HTTP date); undefined when it says none. */
export function retryAfterMs(value: string | null): number | undefined {
  const text = value?.trim();
  if (!text) return undefined;
  if (/^\d+(\.\d+)?$/.test(text)) return Number(text) > 0 ? Number(text) * 1000 : undefined;
  const at = Date.parse(text);
  return Number.isFinite(at) ? Math.max(0, at - Date.now()) : undefined;
}

export function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new HttpError(400, `malformed JSON: ${err instanceof Error ? err.message : String(err)}`);
  }
}

/** Constant-time string comparison for tokens and signatures. */
export function safeEqual(a: string, b: string): boolean {
  const enc = new TextEncoder();
  const x = enc.encode(a);
  const y = enc.encode(b);
  if (x.byteLength !== y.byteLength) return false;
  return crypto.subtle.timingSafeEqual(x, y);
}

export function isLoopback(hostname: string): boolean {
  return hostname === "localhost" || hostname === "[::1]" || /^127\.\d+\.\d+\.\d+$/.test(hostname);
}

/** The one rule for every outbound URL we are configured with: https, or http on loopback only. */
export function isHttpsOrLoopback(url: URL): boolean {
  return url.protocol === "https:" || (url.protocol === "http:" && isLoopback(url.hostname));
}

/** Hex HMAC-SHA256 of `message` keyed with `key` (UTF-8). */
export async function hmacHex(key: string, message: string): Promise<string> {
  const encoder = new TextEncoder();
  const cryptoKey = await crypto.subtle.importKey("raw", encoder.encode(key), { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
  return hex(new Uint8Array(await crypto.subtle.sign("HMAC", cryptoKey, encoder.encode(message))));
}

/** The SHA-256 of a text (UTF-8) or of bytes, in hex: what is stored in place of a session id or an API key, a picture's name. */
export async function sha256Hex(data: string | Uint8Array): Promise<string> {
  return hex(new Uint8Array(await crypto.subtle.digest("SHA-256", typeof data === "string" ? new TextEncoder().encode(data) : data)));
}

const hex = (bytes: Uint8Array) => Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");

/** A stream's bytes, at most `maxBytes` of them: past that it is cancelled and `tooLarge()` thrown (it is never read whole). */
export async function readAtMost(stream: ReadableStream<Uint8Array>, maxBytes: number, tooLarge: () => Error): Promise<Uint8Array> {
  const reader = stream.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > maxBytes) {
      await reader.cancel();
      throw tooLarge();
    }
    chunks.push(value);
  }
  const bytes = new Uint8Array(size);
  let offset = 0;
  for (const chunk of chunks) {
    bytes.set(chunk, offset);
    offset += chunk.byteLength;
  }
  return bytes;
}

// The HMAC request signature antiproton speaks with its own connectors and
// webhook peers: `X-Antiproton-Signature: v1=<hex HMAC-SHA256 of "timestamp.body">`
// with `X-Antiproton-Timestamp` in Unix seconds, within timestamp.ts's window.
// Used by the webhook bridge (both directions), the Discord gateway ingress and
// the Slack Socket Mode forward.
import type { Context } from "hono";
import { hmacHex, HttpError, readBody, type BodyRules } from "../../lib/http.ts";
import { freshTimestamp } from "./timestamp.ts";

export const TIMESTAMP_HEADER = "X-Antiproton-Timestamp";
export const SIGNATURE_HEADER = "X-Antiproton-Signature";

const encoder = new TextEncoder();

/** The headers that sign `body` with `secret` at `now`. */
export async function signatureHeaders(secret: string, body: string, now = Date.now()): Promise<Record<string, string>> {
  const timestamp = String(Math.floor(now / 1000));
  return { [TIMESTAMP_HEADER]: timestamp, [SIGNATURE_HEADER]: `v1=${await hmacHex(secret, `${timestamp}.${body}`)}` };
}

/**
 * Reads the raw body and checks its signature before anything else looks at it.
 * Missing, stale or wrong signature → 401; the body rules give 415/413.
 */
export async function readSignedBody(c: Context, secret: string | readonly string[], rules: BodyRules): Promise<string> {
  const signature = /^v1=([0-9a-f]{64})$/.exec(c.req.header(SIGNATURE_HEADER) ?? "")?.[1];
  if (!signature) throw new HttpError(401, `missing or malformed ${SIGNATURE_HEADER} (expected v1=<64 hex>)`);
  const timestamp = freshTimestamp(TIMESTAMP_HEADER, c.req.header(TIMESTAMP_HEADER));
  const raw = await readBody(c, rules);
  // During a rotation two secrets verify (bridges/webhook/secrets.ts); either signs the request.
  const secrets = typeof secret === "string" ? [secret] : secret;
  for (const candidate of secrets) if (await hmacMatches(candidate, `${timestamp}.${raw}`, signature)) return raw;
  throw new HttpError(401, "bad signature");
}

/** True when `hex` (64 hex digits) is the HMAC-SHA256 of `message` under `secret`; Slack's v0 signatures use it too. */
export async function hmacMatches(secret: string, message: string, hex: string): Promise<boolean> {
  const mac = Uint8Array.from(hex.match(/../g)!, (b) => parseInt(b, 16));
  const key = await crypto.subtle.importKey("raw", encoder.encode(secret), { name: "HMAC", hash: "SHA-256" }, false, ["verify"]);
  // verify() compares in constant time.
  return crypto.subtle.verify("HMAC", key, mac, encoder.encode(message));
}

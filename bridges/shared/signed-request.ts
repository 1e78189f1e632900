// The HMAC request signature antiproton speaks with its own connectors and
// webhook peers: `X-Antiproton-Signature: v1=<hex HMAC-SHA256 of "timestamp.body">`
// with `X-Antiproton-Timestamp` in Unix seconds, accepted within 5 minutes.
// Used by the webhook bridge (both directions) and the Discord gateway ingress.
import type { Context } from "hono";
import { hmacHex, HttpError, readBody, type BodyRules } from "../../lib/http.ts";

export const TIMESTAMP_HEADER = "X-Antiproton-Timestamp";
export const SIGNATURE_HEADER = "X-Antiproton-Signature";
/** Requests older (or further in the future) than this are replays. */
export const MAX_SKEW_SECONDS = 300;

const encoder = new TextEncoder();

/** True when `timestamp` is whole Unix seconds within the replay window of `now`. */
export function isFreshTimestamp(timestamp: string, now = Date.now()): boolean {
  if (!/^\d{1,12}$/.test(timestamp)) return false;
  return Math.abs(now / 1000 - Number(timestamp)) <= MAX_SKEW_SECONDS;
}

/** The headers that sign `body` with `secret` at `now`. */
export async function signatureHeaders(secret: string, body: string, now = Date.now()): Promise<Record<string, string>> {
  const timestamp = String(Math.floor(now / 1000));
  return { [TIMESTAMP_HEADER]: timestamp, [SIGNATURE_HEADER]: `v1=${await hmacHex(secret, `${timestamp}.${body}`)}` };
}

/**
 * Reads the raw body and checks its signature before anything else looks at it.
 * Missing, stale or wrong signature → 401; the body rules give 415/413.
 */
export async function readSignedBody(c: Context, secret: string, rules: BodyRules): Promise<string> {
  const timestamp = c.req.header(TIMESTAMP_HEADER) ?? "";
  const signature = /^v1=([0-9a-f]{64})$/.exec(c.req.header(SIGNATURE_HEADER) ?? "")?.[1];
  if (!signature) throw new HttpError(401, `missing or malformed ${SIGNATURE_HEADER} (expected v1=<64 hex>)`);
  if (!isFreshTimestamp(timestamp)) throw new HttpError(401, `missing or stale ${TIMESTAMP_HEADER} (Unix seconds, within ${MAX_SKEW_SECONDS} s)`);
  const raw = await readBody(c, rules);
  const mac = Uint8Array.from(signature.match(/../g)!, (b) => parseInt(b, 16));
  const key = await crypto.subtle.importKey("raw", encoder.encode(secret), { name: "HMAC", hash: "SHA-256" }, false, ["verify"]);
  // verify() compares in constant time.
  const valid = await crypto.subtle.verify("HMAC", key, mac, encoder.encode(`${timestamp}.${raw}`));
  if (!valid) throw new HttpError(401, "bad signature");
  return raw;
}

// Slack request signing (v0): HMAC-SHA256 over "v0:{timestamp}:{raw body}",
// keyed with the signing secret, within a 5-minute window. Checked on the raw
// body before anything parses it or acts on it.
import type { Context } from "hono";
import { HttpError, readBody, type BodyRules } from "../../lib/http.ts";

/** Requests older (or further in the future) than this are replays. */
export const MAX_SKEW_SECONDS = 300;

const encoder = new TextEncoder();

export async function verifySlackSignature(secret: string, timestamp: string, raw: string, signature: string, nowSeconds = Date.now() / 1000): Promise<boolean> {
  const hex = /^v0=([0-9a-f]{64})$/.exec(signature)?.[1];
  if (!hex || !/^\d{1,12}$/.test(timestamp) || Math.abs(nowSeconds - Number(timestamp)) > MAX_SKEW_SECONDS) return false;
  const key = await crypto.subtle.importKey("raw", encoder.encode(secret), { name: "HMAC", hash: "SHA-256" }, false, ["verify"]);
  const mac = Uint8Array.from(hex.match(/../g)!, (b) => parseInt(b, 16));
  // subtle.verify compares in constant time.
  return crypto.subtle.verify("HMAC", key, mac, encoder.encode(`v0:${timestamp}:${raw}`));
}

/** The raw body of a request Slack signed: 401 unless the signature holds; 415/413 by the body rules. */
export async function readSlackBody(c: Context, secret: string, rules: BodyRules): Promise<string> {
  const timestamp = c.req.header("x-slack-request-timestamp");
  const signature = c.req.header("x-slack-signature");
  if (!timestamp || !signature) throw new HttpError(401, "missing X-Slack-Request-Timestamp or X-Slack-Signature");
  if (!/^\d{1,12}$/.test(timestamp) || Math.abs(Date.now() / 1000 - Number(timestamp)) > MAX_SKEW_SECONDS) {
    throw new HttpError(401, `stale or malformed X-Slack-Request-Timestamp (must be within ${MAX_SKEW_SECONDS} s)`);
  }
  const raw = await readBody(c, rules);
  if (!(await verifySlackSignature(secret, timestamp, raw, signature))) throw new HttpError(401, "bad Slack signature");
  return raw;
}

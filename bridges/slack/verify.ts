// Slack request signing (v0): HMAC-SHA256 over "v0:{timestamp}:{raw body}",
// keyed with the signing secret, within the shared replay window. Checked on
// the raw body before anything parses it or acts on it.
import type { Context } from "hono";
import { HttpError, readBody, type BodyRules } from "../../lib/http.ts";
import { hmacMatches } from "../shared/signed-request.ts";
import { freshTimestamp } from "../shared/timestamp.ts";

/** True when `signature` (v0=<hex>) signs `raw` sent at `timestamp`; the timestamp's freshness is checked apart. */
export async function verifySlackSignature(secret: string, timestamp: string, raw: string, signature: string): Promise<boolean> {
  const hex = /^v0=([0-9a-f]{64})$/.exec(signature)?.[1];
  return hex !== undefined && hmacMatches(secret, `v0:${timestamp}:${raw}`, hex);
}

/** The raw body of a request Slack signed: 401 unless the signature holds and is fresh; 415/413 by the body rules. */
export async function readSlackBody(c: Context, secret: string, rules: BodyRules): Promise<string> {
  const signature = c.req.header("x-slack-signature");
  if (!signature) throw new HttpError(401, "missing X-Slack-Signature");
  const timestamp = freshTimestamp("X-Slack-Request-Timestamp", c.req.header("x-slack-request-timestamp"));
  const raw = await readBody(c, rules);
  if (!(await verifySlackSignature(secret, timestamp, raw, signature))) throw new HttpError(401, "bad Slack signature");
  return raw;
}

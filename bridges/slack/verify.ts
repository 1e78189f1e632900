// Slack request signing (v0): HMAC-SHA256 over "v0:{timestamp}:{raw body}",
// keyed with the signing secret, within the shared replay window. Checked on
// the raw body before anything parses it or acts on it. What the Socket Mode
// connector forwards is signed with our own request signature instead.
import type { Context } from "hono";
import { HttpError, readBody, type BodyRules } from "../../lib/http.ts";
import { hmacMatches, readSignedBody } from "../shared/signed-request.ts";
import { freshTimestamp } from "../shared/timestamp.ts";
import { signingSecret, socketForwardSecret } from "./config.ts";

/** True when `signature` (v0=<hex>) signs `raw` sent at `timestamp`; the timestamp's freshness is checked apart. */
export async function verifySlackSignature(secret: string, timestamp: string, raw: string, signature: string): Promise<boolean> {
  const hex = /^v0=([0-9a-f]{64})$/.exec(signature)?.[1];
  return hex !== undefined && hmacMatches(secret, `v0:${timestamp}:${raw}`, hex);
}

/** The raw body of a request Slack signed: 401 unless the signature holds and is fresh; 415/413 by the body rules. */
export async function readSlackBody(c: Context<{ Bindings: Env }>, rules: BodyRules): Promise<string> {
  const secret = signingSecret(c.env);
  const signature = c.req.header("x-slack-signature");
  if (!signature) throw new HttpError(401, "missing X-Slack-Signature");
  const timestamp = freshTimestamp("X-Slack-Request-Timestamp", c.req.header("x-slack-request-timestamp"));
  const raw = await readBody(c, rules);
  if (!(await verifySlackSignature(secret, timestamp, raw, signature))) throw new HttpError(401, "bad Slack signature");
  return raw;
}

/** The raw body the Socket Mode connector (socket-mode.mjs) forwarded, signed with SLACK_SOCKET_FORWARD_SECRET. */
export function readForwardBody(c: Context<{ Bindings: Env }>, rules: BodyRules): Promise<string> {
  const secret = socketForwardSecret(c.env);
  return readSignedBody(c, secret, rules);
}

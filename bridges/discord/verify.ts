// What proves a Discord request genuine. Interactions: Ed25519 over
// "timestamp + body" with the application's public key (Discord probes the
// endpoint with bad signatures), within the shared replay window. Gateway
// messages from our own connector: the shared HMAC request signature.
import { verifyKey } from "discord-interactions";
import type { Context } from "hono";
import { HttpError, readBody } from "../../lib/http.ts";
import { readSignedBody } from "../shared/signed-request.ts";
import { freshTimestamp } from "../shared/timestamp.ts";
import { gatewaySecret, publicKey as configuredPublicKey } from "./config.ts";

const JSON_BODY = { contentTypes: ["application/json"], maxBytes: 64 * 1024 };

/** The raw body of an interaction Discord signed: 401 unless the signature holds and is fresh; 415/413 by the body rules. */
export async function readInteractionBody(c: Context<{ Bindings: Env }>): Promise<string> {
  const publicKey = configuredPublicKey(c.env);
  if (!publicKey) throw new HttpError(503, "DISCORD_PUBLIC_KEY is not configured");
  const signature = c.req.header("x-signature-ed25519") ?? "";
  if (!/^[0-9a-f]{128}$/i.test(signature)) throw new HttpError(401, "missing or malformed X-Signature-Ed25519");
  // Discord specifies no window; the shared one keeps a captured request from being replayed later.
  const timestamp = freshTimestamp("X-Signature-Timestamp", c.req.header("x-signature-timestamp"));
  const raw = await readBody(c, JSON_BODY);
  // verifyKey returns a promise: unawaited it would be truthy and let everything through.
  if (!(await verifyKey(raw, signature, timestamp, publicKey))) throw new HttpError(401, "bad signature");
  return raw;
}

/** The raw body of a message the gateway connector forwarded, signed with DISCORD_GATEWAY_SECRET. */
export function readGatewayBody(c: Context<{ Bindings: Env }>): Promise<string> {
  const secret = gatewaySecret(c.env);
  if (!secret) throw new HttpError(503, "DISCORD_GATEWAY_SECRET is not configured");
  return readSignedBody(c, secret, JSON_BODY);
}

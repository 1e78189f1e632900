// A webhook peer signs its events with WEBHOOK_SECRET, in the shared HMAC
// request signature (bridges/shared/signed-request.ts); we sign our callbacks
// the same way.
import type { Context } from "hono";
import { HttpError } from "../../lib/http.ts";
import { readSignedBody } from "../shared/signed-request.ts";
import { webhookSecret } from "./config.ts";

const MAX_BODY_BYTES = 64 * 1024;

/** The raw body of an event the peer signed: 401 unless the signature holds and is fresh; 415/413 by the body rules. */
export function readWebhookBody(c: Context<{ Bindings: Env }>): Promise<string> {
  const secret = webhookSecret(c.env);
  if (!secret) throw new HttpError(503, "WEBHOOK_SECRET is not configured");
  return readSignedBody(c, secret, { contentTypes: ["application/json"], maxBytes: MAX_BODY_BYTES });
}

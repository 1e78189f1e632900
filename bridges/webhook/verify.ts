// A webhook peer signs its events with its tenant's own secret (or, for a
// tenant without one, the shared WEBHOOK_SECRET while it is on), in the shared
// HMAC request signature (bridges/shared/signed-request.ts); we sign our
// callbacks the same way.
import type { Context } from "hono";
import { HttpError } from "../../lib/http.ts";
import { readSignedBody } from "../shared/signed-request.ts";
import { verifyingSecrets } from "./secrets.ts";

const MAX_BODY_BYTES = 64 * 1024;

/** The raw body of an event the peer signed for the path's tenant: 401 unless the signature holds and is fresh; 415/413 by the body rules. */
export async function readWebhookBody(c: Context<{ Bindings: Env }>, tenant: string): Promise<string> {
  const secrets = await verifyingSecrets(c.env, tenant);
  if (secrets.length === 0) throw new HttpError(401, `tenant "${tenant}" has no webhook secret (the shared one is unset or switched off)`);
  return readSignedBody(c, secrets, { contentTypes: ["application/json"], maxBytes: MAX_BODY_BYTES });
}

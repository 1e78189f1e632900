// The webhook's side of the outbox: each row is POSTed, signed, to the tenant's
// callback_url with an Idempotency-Key that stays the same across retries of
// the row, so a receiver that saw a first attempt can tell the retry apart.
import { retryAfterMs } from "../../lib/http.ts";
import { sendTimeoutMs, type ChatOutbound, type DeliveryResult, type OutboxDelivery } from "../../runtime/index.ts";
import { signatureHeaders } from "../shared/signed-request.ts";
import { clip, splitText } from "../../lib/text.ts";
import { callbackFor } from "./callbacks.ts";
import { cardJson } from "./card.ts";
import { signingSecret } from "./secrets.ts";

/** A message we send is at most as long as one we accept. */
export const WEBHOOK_TEXT_LIMIT = 32_000;
/** The receiver may ask for a retry; any other 4xx means this row will never be accepted. */
const RETRYABLE = new Set([408, 425, 429]);

/** The JSON body for one outbox row; `ref` names the message a status or card updates in place. */
function payload(delivery: OutboxDelivery, ref: string | undefined) {
  const { message, route, conversation } = delivery;
  const common = { tenant: route.tenant, agent: route.agent, conversation };
  switch (message.kind) {
    case "status":
      return { type: "status", ...common, text: clip(message.text, WEBHOOK_TEXT_LIMIT), state: message.state, status_id: ref };
    case "card":
      return { type: "card", ...common, card_id: ref, card: cardJson(message.card) };
    default:
      return { type: message.kind, ...common, text: clip(message.text, WEBHOOK_TEXT_LIMIT) };
  }
}

async function deliver(env: Env, delivery: OutboxDelivery): Promise<DeliveryResult> {
  const secret = await signingSecret(env, delivery.route.tenant);
  if (!secret) return { ok: false, error: `tenant ${delivery.route.tenant} has no webhook secret (the shared one is unset or switched off)` };
  const registration = await callbackFor(env, delivery.route.tenant);
  if (!registration) return { ok: false, error: `no callback_url registered for tenant ${delivery.route.tenant}` };

  // A status or card is one message updated in place: its id is the idempotency key of its first post.
  const ref = delivery.message.kind === "status" || delivery.message.kind === "card" ? (delivery.ref ?? delivery.idempotencyKey) : undefined;
  const body = JSON.stringify(payload(delivery, ref));
  const headers = { "content-type": "application/json", "idempotency-key": delivery.idempotencyKey, ...(await signatureHeaders(secret, body)) };
  // A receiver that does not answer holds up its conversation's outbox: the attempt is given up with the send, and retried.
  const res = await fetch(registration.callback_url, { method: "POST", headers, body, signal: AbortSignal.timeout(sendTimeoutMs(env)) });
  await res.body?.cancel();
  if (res.ok) return ref ? { ok: true, ref } : { ok: true };
  const error = `callback answered ${res.status}`;
  if (res.status >= 500 || RETRYABLE.has(res.status)) {
    const wait = retryAfterMs(res.headers.get("retry-after"));
    return wait === undefined ? { ok: false, error } : { ok: false, error, retryAfterMs: wait };
  }
  return { ok: false, error, permanent: true };
}

export const webhookOutbound: ChatOutbound = { platform: "webhook", split: (text) => splitText(text, WEBHOOK_TEXT_LIMIT), deliver };

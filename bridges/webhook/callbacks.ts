// Where a webhook tenant's replies go: the callback_url registered for it in the
// control plane, and the outbound that POSTs each outbox row there, signed.
import { z } from "zod";
import type { Card } from "../../approvals/index.ts";
import { httpsOrLoopbackUrl, secretNamed } from "../../lib/config.ts";
import { controlPlane, type ChatOutbound, type DeliveryResult, type OutboxDelivery } from "../../runtime/index.ts";
import { signatureHeaders } from "../shared/signed-request.ts";

const NAMESPACE = "webhook-callbacks";

export interface CallbackRegistration {
  callback_url: string;
}

export const registrationSchema = z.object({
  callback_url: httpsOrLoopbackUrl("callback_url"),
});

export async function callbackFor(env: Env, tenant: string): Promise<CallbackRegistration | null> {
  // Only registrationSchema-checked values are stored under this namespace.
  return (await controlPlane(env).get(NAMESPACE, tenant)) as CallbackRegistration | null;
}

export function registerCallback(env: Env, tenant: string, registration: CallbackRegistration): Promise<void> {
  return controlPlane(env).put(NAMESPACE, tenant, registration);
}

export function unregisterCallback(env: Env, tenant: string): Promise<boolean> {
  return controlPlane(env).delete(NAMESPACE, tenant);
}

/** The receiver may ask for a retry; any other 4xx means this row will never be accepted. */
const RETRYABLE = new Set([408, 425, 429]);
/** A receiver that does not answer holds up its conversation's outbox; give up on the attempt and retry. */
const REQUEST_TIMEOUT_MS = 10_000;

/** An approval card as JSON: what is asked, its state, and while pending, the actions to send back as a decision. */
export function cardJson(card: Card) {
  return {
    hold_id: card.holdId,
    state: card.state,
    title: card.title,
    tool: card.tool,
    arguments: card.arguments,
    requested_by: card.requestedBy,
    expires_at: new Date(card.expiresAt).toISOString(),
    decided_by: card.decidedBy ?? null,
    outcome: card.outcome ?? null,
    actions: card.actions
      ? [
          { action: "approve", label: "Approve", value: card.actions.approve },
          { action: "deny", label: "Deny", value: card.actions.deny },
        ]
      : [],
  };
}

/** The JSON body for one outbox row; `ref` names the message a status or card updates in place. */
function payload(delivery: OutboxDelivery, ref: string | undefined) {
  const { message, route, conversation } = delivery;
  const common = { tenant: route.tenant, agent: route.agent, conversation };
  switch (message.kind) {
    case "status":
      return { type: "status", ...common, text: message.text, state: message.state, status_id: ref };
    case "card":
      return { type: "card", ...common, card_id: ref, card: cardJson(message.card) };
    default:
      return { type: message.kind, ...common, text: message.text };
  }
}

async function deliver(env: Env, delivery: OutboxDelivery): Promise<DeliveryResult> {
  const secret = secretNamed(env, "WEBHOOK_SECRET");
  if (!secret) return { ok: false, error: "WEBHOOK_SECRET is not configured" };
  const registration = await callbackFor(env, delivery.route.tenant);
  if (!registration) return { ok: false, error: `no callback_url registered for tenant ${delivery.route.tenant}` };

  // A status or card is one message updated in place: its id is the idempotency key of its first post.
  const ref = delivery.message.kind === "status" || delivery.message.kind === "card" ? (delivery.ref ?? delivery.idempotencyKey) : undefined;
  const body = JSON.stringify(payload(delivery, ref));
  const headers = { "content-type": "application/json", "idempotency-key": delivery.idempotencyKey, ...(await signatureHeaders(secret, body)) };
  const res = await fetch(registration.callback_url, { method: "POST", headers, body, signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS) });
  await res.body?.cancel();
  if (res.ok) return ref ? { ok: true, ref } : { ok: true };
  const error = `callback answered ${res.status}`;
  if (res.status >= 500 || RETRYABLE.has(res.status)) {
    const retryAfter = Number(res.headers.get("retry-after"));
    return Number.isFinite(retryAfter) && retryAfter > 0 ? { ok: false, error, retryAfterMs: retryAfter * 1000 } : { ok: false, error };
  }
  return { ok: false, error, permanent: true };
}

export const webhookOutbound: ChatOutbound = { platform: "webhook", split: (text) => [text], deliver };

// The generic webhook bridge as a test drives it: a tenant with its callback at
// the fake receiver (test/fakes/callback.mjs), signed events, and what reached the callback.
import { env } from "cloudflare:workers";
import { expect } from "vitest";
import { signatureHeaders } from "../../../bridges/shared/signed-request.ts";
import { unique, waitFor, worker } from "../../support.ts";

const E = env as unknown as Record<string, string>;
const ADMIN = { authorization: "Bearer test-admin-token" };

export interface CardJson {
  hold_id: string;
  state: string;
  title: string;
  decided_by: string | null;
  actions: { action: string; label: string; value: string }[];
}

export interface Delivery {
  idempotencyKey: string;
  signatureValid: boolean;
  body: { type: string; text: string; conversation: string; state?: string; status_id?: string; tenant: string; agent: string; card_id?: string; card?: CardJson };
}

export async function hook(name: string): Promise<{ attempts: number; failures: Delivery[]; deliveries: Delivery[] }> {
  return (await fetch(`${E.FAKE_CALLBACK_URL}/_control/hooks/${name}`)).json();
}

/** A tenant with its callback registered at hook `<tenant>` of the fake receiver, which first fails `failFirst` POSTs with `status`. */
export async function tenantWithCallback(failFirst = 0, status = 503): Promise<string> {
  const tenant = unique("wh");
  await fetch(`${E.FAKE_CALLBACK_URL}/_control/hooks/${tenant}`, { method: "PUT", body: JSON.stringify({ fail: failFirst, status }) });
  await registerCallback(tenant);
  return tenant;
}

/** Registers the tenant's callback_url: hook `<tenant>` of the fake receiver. */
export async function registerCallback(tenant: string): Promise<void> {
  const res = await worker(`/v1/webhook/tenants/${tenant}`, {
    method: "PUT",
    headers: { ...ADMIN, "content-type": "application/json" },
    body: JSON.stringify({ callback_url: `${E.FAKE_CALLBACK_URL}/hooks/${tenant}` }),
  });
  expect(res.status).toBe(200);
}

/** Signs and posts an event; it names `tenant` in its body, as the protocol asks, unless it says otherwise. */
export async function send(tenant: string, event: object, headers?: Record<string, string>): Promise<Response> {
  const body = JSON.stringify({ tenant, ...event });
  const signed = headers ?? (await signatureHeaders(E.WEBHOOK_SECRET!, body));
  return worker(`/webhook/${tenant}/events`, { method: "POST", headers: { "content-type": "application/json", ...signed }, body });
}

export const message = (conversation: string, text: string, key = unique("key")) => ({
  type: "message",
  idempotency_key: key,
  conversation,
  user: { id: "u1", name: "Ada" },
  text,
});

/** Waits until the turn's final status reached the callback, then returns every delivery. */
export function finished(tenant: string, state = "done"): Promise<Delivery[]> {
  return waitFor(`status ${state} at the callback`, async () => {
    const { deliveries } = await hook(tenant);
    return deliveries.some((d) => d.body.type === "status" && d.body.state === state) ? deliveries : undefined;
  });
}

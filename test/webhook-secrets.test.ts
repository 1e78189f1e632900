// Per-tenant webhook secrets (bridges/webhook/secrets.ts): an event signed with
// tenant A's secret is refused for tenant B; during a rotation the old and the
// new secret both verify, after retirement only the new one; the shared secret
// serves only tenants without their own, and can be switched off.
import { env } from "cloudflare:workers";
import { createExecutionContext } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { signatureHeaders } from "../bridges/shared/signed-request.ts";
import { unique, worker } from "./support.ts";
import handler from "./worker-under-test.ts";
import { finished, message, send, tenantWithCallback } from "./webhook-helpers.ts";

const E = env as unknown as Record<string, string>;
const ADMIN = "Bearer test-admin-token";

async function rotate(tenant: string, body: object = {}): Promise<{ secret: string; previous_retires_at: string | null }> {
  const res = await worker(`/v1/webhook/tenants/${tenant}/secret`, { method: "POST", headers: { authorization: ADMIN, "content-type": "application/json" }, body: JSON.stringify(body) });
  expect(res.status, await res.clone().text()).toBe(201);
  return res.json();
}

/** An event for `tenant` signed with `secret`, posted to the tenant named in the path. */
async function signedWith(secret: string, pathTenant: string, bodyTenant = pathTenant): Promise<Response> {
  const event = message("c1", "hello", unique("k"));
  const body = JSON.stringify({ tenant: bodyTenant, ...event });
  return send(pathTenant, { ...event, tenant: bodyTenant }, await signatureHeaders(secret, body));
}

describe("per-tenant webhook secrets", () => {
  it("A's secret does not sign for B, and a signed event naming another tenant is refused", async () => {
    const A = await tenantWithCallback();
    const B = await tenantWithCallback();
    const { secret: a } = await rotate(A);
    const { secret: b } = await rotate(B);
    expect(a).not.toBe(b);
    expect((await signedWith(a, B)).status).toBe(401);
    expect((await signedWith(a, A, B)).status).toBe(403);
    expect((await signedWith(b, B)).status).toBe(202);
    // A tenant with its own secret no longer takes the shared one.
    expect((await signedWith(E.WEBHOOK_SECRET!, A)).status).toBe(401);
  });

  it("during a rotation both secrets verify; after retirement only the new one; callbacks are signed with the current one", async () => {
    const A = await tenantWithCallback();
    const { secret: first } = await rotate(A);
    const { secret: second, previous_retires_at } = await rotate(A, { overlap_hours: 1 });
    expect(Date.parse(previous_retires_at!)).toBeGreaterThan(Date.now());
    expect((await signedWith(first, A)).status).toBe(202);
    expect((await signedWith(second, A)).status).toBe(202);

    const retired = await worker(`/v1/webhook/tenants/${A}/secret/previous`, { method: "DELETE", headers: { authorization: ADMIN } });
    expect(retired.status).toBe(200);
    expect((await signedWith(first, A)).status).toBe(401);
    expect((await signedWith(second, A)).status).toBe(202);

    // An overlap of zero retires the previous secret at once.
    const { secret: third, previous_retires_at: none } = await rotate(A, { overlap_hours: 0 });
    expect(none).toBeNull();
    expect((await signedWith(second, A)).status).toBe(401);
    expect((await signedWith(third, A)).status).toBe(202);


    // Rotations and the retirement are in the trail, without a secret.
    const audit = (await (await worker(`/v1/tenants/${A}/audit`, { headers: { authorization: ADMIN } })).json()) as { entries: { action: string; actor: string }[] };
    expect(audit.entries.map((e) => e.action).filter((a) => a.startsWith("webhook-secret")).reverse()).toEqual(["webhook-secret.rotate", "webhook-secret.rotate", "webhook-secret.retire", "webhook-secret.rotate"]);
    expect(JSON.stringify(audit)).not.toContain(first);
    expect(JSON.stringify(audit)).not.toContain(second);
  });

  it("our callbacks to a tenant are signed with its current secret", async () => {
    const A = await tenantWithCallback();
    const { secret } = await rotate(A);
    await fetch(`${E.FAKE_CALLBACK_URL}/_control/hooks/${A}`, { method: "PUT", body: JSON.stringify({ secret }) });
    expect((await signedWith(secret, A)).status).toBe(202);
    const deliveries = await finished(A);
    expect(deliveries.map((d) => [d.body.type, d.signatureValid])).toEqual([
      ["status", true],
      ["reply", true],
      ["status", true],
    ]);
  });

  it("the shared secret is only a default, and switched off it signs nothing", async () => {
    const A = await tenantWithCallback();
    const event = message("c1", "hello", unique("k"));
    const body = JSON.stringify({ tenant: A, ...event });
    const post = async (vars: Record<string, string>) =>
      handler.fetch!(
        new Request(`http://antiproton.test/webhook/${A}/events`, { method: "POST", headers: { "content-type": "application/json", ...(await signatureHeaders(E.WEBHOOK_SECRET!, body)) }, body }) as Request<unknown, IncomingRequestCfProperties>,
        ({ ...env, ...vars }) as Env,
        createExecutionContext(),
      );
    const off = await post({ WEBHOOK_SHARED_SECRET_ENABLED: "false" });
    expect(off.status).toBe(401);
    expect(await off.json()).toMatchObject({ error: expect.stringContaining("switched off") });
    const on = await post({});
    expect(on.status, await on.clone().text()).toBe(202);
  });
});

// Calls into objects, counted (lib/object-calls.ts, the measure of docs/scale.md):
// with COUNT_OBJECT_CALLS on, a turn's calls are counted by class and object,
// the objects' own calls to each other included (they share the isolate's
// tally); off, the namespace is handed back as it is, nothing is
// counted and GET /v1/object-calls is not there.
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { countedNamespace, type ObjectCallCount } from "../../../lib/object-calls.ts";
import { postMessage, settled, unique, withVars, worker } from "../../support.ts";

const ADMIN = { authorization: "Bearer test-admin-token" };

async function turn(tenant: string): Promise<void> {
  expect((await postMessage(tenant, "helper", { text: "hello", conversation: "c" })).status).toBe(202);
  await settled(tenant, "helper", "c");
}

async function countsOf(tenant: string): Promise<ObjectCallCount[]> {
  const res = await worker("/v1/object-calls", { headers: ADMIN });
  expect(res.status).toBe(200);
  const { objects } = (await res.json()) as { objects: ObjectCallCount[] };
  return objects.filter((o) => o.object.includes(tenant));
}

describe("calls into objects, counted", () => {
  it("counts a turn's calls by class and object with COUNT_OBJECT_CALLS on, the objects' own calls included", async () => {
    const tenant = unique("counted");
    await withVars({ COUNT_OBJECT_CALLS: "true" }, async () => {
      await turn(tenant);
      const counted = await countsOf(tenant);
      const calls = (objectClass: string, object: string, method?: string) =>
        counted.filter((o) => o.objectClass === objectClass && o.object === object && (method === undefined || o.method === method)).reduce((sum, o) => sum + o.calls, 0);
      // The submit and the reads of the conversation, from the Worker.
      expect(calls("AgentObject", `${tenant}:helper`)).toBeGreaterThan(1);
      // The model call's hand-over, made inside the agent object.
      expect(counted.filter((o) => o.objectClass === "Courier" && o.object.startsWith(`${tenant}:helper:courier-`) && o.method === "take").length).toBeGreaterThan(0);
      // The model call counted in the tenant's ledger, from the courier.
      expect(calls("Ledger", `tenant:${tenant}`, "record")).toBeGreaterThan(0);
      // Only the platform reads them.
      const key = await worker(`/v1/tenants/${tenant}/keys`, { method: "POST", headers: { ...ADMIN, "content-type": "application/json" }, body: JSON.stringify({ name: "reader", access: "read" }) });
      const { key: token } = (await key.json()) as { key: string };
      expect((await worker("/v1/object-calls", { headers: { authorization: `Bearer ${token}` } })).status).toBe(403);
    });
  });

  it("counts nothing and serves no counts with it off: the namespace is the binding itself", async () => {
    const tenant = unique("uncounted");
    expect(countedNamespace(env, "AgentObject", env.AGENT)).toBe(env.AGENT);
    const res = await worker("/v1/object-calls", { headers: ADMIN });
    expect(res.status).toBe(404);
    expect(await res.json()).toEqual({ error: expect.stringContaining("COUNT_OBJECT_CALLS=true") });
    await turn(tenant);
    await withVars({ COUNT_OBJECT_CALLS: "true" }, async () => expect(await countsOf(tenant)).toEqual([]));
  });
});

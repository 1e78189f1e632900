// The directory of tenants and agents: an agent object lists itself once, at
// its first event, with that event's platform, in the same call that gives it
// its settings; later events never write it again.
import { env } from "cloudflare:workers";
import { runInDurableObject } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { controlPlane, listAgents, listTenants } from "../../../runtime/index.ts";
import type { ControlPlane } from "../../../runtime/control/index.ts";
import { postMessage, settled, unique } from "../../support.ts";

const A = "helper";

describe("directory", () => {
  it("an agent is listed at its first event, with the event's platform, and the tenant with its agents", async () => {
    const tenant = unique("dir");
    expect(await listAgents(env, tenant)).toEqual([]);
    await postMessage(tenant, A, { text: "hi", conversation: "c" });
    // Listed before the event is even answered.
    expect(await listAgents(env, tenant)).toEqual([{ tenant, agent: A, platform: "api", displayName: null, firstSeen: expect.any(Number) }]);
    await postMessage(tenant, "second", { text: "hi", conversation: "c" });
    expect(await listAgents(env, tenant)).toHaveLength(2);
    expect((await listTenants(env)).find((t) => t.tenant === tenant)).toMatchObject({ platforms: ["api"], agents: 2, displayName: null });
    await settled(tenant, A, "c");
  });

  it("an object lists itself once: a row removed later is not written again", async () => {
    const tenant = unique("once");
    await postMessage(tenant, A, { text: "hi", conversation: "c" });
    await runInDurableObject(controlPlane(env) as DurableObjectStub<ControlPlane>, (_instance, state) => {
      state.storage.sql.exec("DELETE FROM directory WHERE tenant = ?", tenant);
    });
    await postMessage(tenant, A, { text: "again", conversation: "c" });
    await settled(tenant, A, "c");
    expect(await listAgents(env, tenant)).toEqual([]);
  });
});

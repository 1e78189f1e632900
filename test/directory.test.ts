// The directory of tenants and agents the console navigates: an agent object
// lists itself once, at its first event, with that event's platform; a write
// that was lost is made again at its next event, and never again after.
import { env } from "cloudflare:workers";
import { runInDurableObject } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { controlPlane, listAgents, listTenants } from "../runtime/index.ts";
import type { ControlPlane } from "../runtime/control-plane.ts";
import { agent, rows } from "./agents.ts";
import { postMessage, settled, unique, waitFor } from "./support.ts";

const A = "helper";

function listed(tenant: string) {
  return waitFor(`${tenant} in the directory`, async () => {
    const agents = await listAgents(env, tenant);
    return agents.length > 0 ? agents : undefined;
  });
}

/** An agent listed after its first event, with its row then removed from the directory. */
async function listedThenRemoved(tenant: string): Promise<void> {
  await postMessage(tenant, A, { text: "hi", conversation: "c" });
  await listed(tenant);
  await waitFor("the object to note it is listed", async () => (await rows(tenant, A, "SELECT 1 FROM meta WHERE key = 'directory_listed'")).length === 1);
  await deleteRow(tenant);
}

function deleteRow(tenant: string): Promise<void> {
  return runInDurableObject(controlPlane(env) as DurableObjectStub<ControlPlane>, (_instance, state) => {
    state.storage.sql.exec("DELETE FROM directory WHERE tenant = ?", tenant);
  });
}

describe("directory", () => {
  it("an agent is listed at its first event, with the event's platform, and the tenant with its agents", async () => {
    const tenant = unique("dir");
    expect(await listAgents(env, tenant)).toEqual([]);
    await postMessage(tenant, A, { text: "hi", conversation: "c" });
    expect(await listed(tenant)).toEqual([{ tenant, agent: A, platform: "api", displayName: null, firstSeen: expect.any(Number) }]);
    await postMessage(tenant, "second", { text: "hi", conversation: "c" });
    await waitFor("the second agent", async () => (await listAgents(env, tenant)).length === 2);
    expect((await listTenants(env)).find((t) => t.tenant === tenant)).toMatchObject({ platforms: ["api"], agents: 2, displayName: null });
    await settled(tenant, A, "c");
  });

  it("an object lists itself once: a row removed later is not written again", async () => {
    const tenant = unique("once");
    await listedThenRemoved(tenant);
    await postMessage(tenant, A, { text: "again", conversation: "c" });
    await settled(tenant, A, "c");
    expect(await listAgents(env, tenant)).toEqual([]);
  });

  it("a listing that was lost is made at the object's next event", async () => {
    const tenant = unique("lost");
    // As if the write had failed: no row, and the object never noted it.
    await listedThenRemoved(tenant);
    await runInDurableObject(agent(tenant, A), (_instance, state) => void state.storage.sql.exec("DELETE FROM meta WHERE key = 'directory_listed'"));
    await postMessage(tenant, A, { text: "again", conversation: "c" });
    expect(await listed(tenant)).toMatchObject([{ tenant, agent: A, platform: "api" }]);
  });
});

// Tenants apart for settings and agents (issue 39): a tenant's settings (its
// own and each agent's), their version and its agents' descriptions live in
// the tenant's own object; the deployment-wide directory keeps names,
// platforms and dates. A deployment that ran the release before has them in
// the control plane: they are served through the move, moved once, gone from
// the control plane, and the version goes on growing from where it was.
import { env } from "cloudflare:workers";
import { runInDurableObject } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { controlPlane, listAgents } from "../../../runtime/index.ts";
import { agentSettings, parseSettings, tenantStub } from "../../../runtime/control/index.ts";
import { postMessage, settled, unique, worker } from "../../support.ts";

const ADMIN = { authorization: "Bearer test-admin-token", "content-type": "application/json" };
const KINDS = ["mounts", "models", "secondMessage", "settings-version"];

function api(method: string, path: string, body?: unknown): Promise<Response> {
  return worker(`/v1${path}`, { method, headers: ADMIN, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });
}

/** The control plane's settings rows of those kinds kept for `tenant` or its agents, and its directory rows' descriptions. */
function controlRows(tenant: string): Promise<{ settings: { namespace: string; key: string }[]; descriptions: { agent: string; description: string | null }[] }> {
  return runInDurableObject(controlPlane(env), (_instance, state) => ({
    settings: state.storage.sql
      .exec<{ namespace: string; key: string }>(`SELECT namespace, key FROM settings WHERE namespace IN (${KINDS.map(() => "?").join(", ")}) ORDER BY namespace, key`, ...KINDS)
      .toArray()
      .filter((row) => row.key === tenant || row.key.startsWith(`${tenant}/`)),
    descriptions: state.storage.sql.exec<{ agent: string; description: string | null }>("SELECT agent, description FROM directory WHERE tenant = ? ORDER BY agent", tenant).toArray(),
  }));
}

describe("a tenant's settings and agents", () => {
  it("kept in the control plane by the release before are served through the move, then held by the tenant's object alone, moved once, the version growing on", async () => {
    const tenant = unique("set");
    // A tenant whose name begins with the first's: none of its rows move with the first's.
    const neighbour = `${tenant}-b`;
    const mounts = [{ alias: "notes", plugin: "memory", policy: { write: "approval" } }];
    // As the release before wrote them: one namespace per kind, the tenant or `<tenant>/<agent>` as key; descriptions in the directory.
    await runInDurableObject(controlPlane(env), (_instance, state) => {
      const put = (namespace: string, key: string, value: unknown) =>
        state.storage.sql.exec("INSERT INTO settings (namespace, key, value, updated_at) VALUES (?, ?, ?, ?)", namespace, key, JSON.stringify(value), Date.now());
      put("models", tenant, { model: "local" });
      put("mounts", `${tenant}/old`, mounts);
      put("secondMessage", `${tenant}/old`, "queue");
      put("settings-version", tenant, 7);
      put("secondMessage", `${neighbour}/old`, "reject");
      put("settings-version", neighbour, 3);
      const row = (t: string, agent: string, description: string | null, deletedAt: number | null) =>
        state.storage.sql.exec("INSERT INTO directory (tenant, agent, platform, description, first_seen, deleted_at) VALUES (?, ?, 'api', ?, ?, ?)", t, agent, description, Date.now() - 1000, deletedAt);
      row(tenant, "old", "Keeps the old words.", null);
      row(tenant, "gone", "Deleted long ago.", Date.now() - 500);
      row(neighbour, "old", "The neighbour's.", null);
    });

    // Served, by several first requests at once (the object takes the rows over once).
    const [read, list, again] = await Promise.all([api("GET", `/tenants/${tenant}/agents/old`), api("GET", `/tenants/${tenant}/agents`), api("GET", `/tenants/${tenant}/agents/old`)]);
    expect(read.status, await read.clone().text()).toBe(200);
    const agent = (await read.json()) as { description: string; model: { effective: { model: string }; own: unknown }; mounts: { own: unknown }; secondMessage: { own: string } };
    expect(agent).toMatchObject({ description: "Keeps the old words.", model: { effective: { model: "local" }, own: null }, mounts: { own: mounts }, secondMessage: { own: "queue" } });
    expect(await again.json()).toEqual(agent);
    expect(((await list.json()) as { agents: { agent: string; description: string }[] }).agents.map((a) => [a.agent, a.description])).toEqual([["old", "Keeps the old words."]]);
    // A deleted agent's name stays taken.
    const taken = await api("POST", `/tenants/${tenant}/agents`, { agent: "gone" });
    expect(taken.status).toBe(409);
    expect(await taken.text()).toMatch(/was deleted/);

    // Moved: the control plane holds none of the tenant's settings, nor its descriptions; the neighbour's are where they were.
    expect(await controlRows(tenant)).toEqual({ settings: [], descriptions: [{ agent: "gone", description: null }, { agent: "old", description: null }] });
    expect(await controlRows(neighbour)).toEqual({
      settings: [
        { namespace: "secondMessage", key: `${neighbour}/old` },
        { namespace: "settings-version", key: neighbour },
      ],
      descriptions: [{ agent: "old", description: "The neighbour's." }],
    });
    expect(await listAgents(env, tenant)).toEqual([{ tenant, agent: "old", platform: "api", displayName: null, firstSeen: expect.any(Number) }]);
    const held = await runInDurableObject(tenantStub(env, tenant), (_instance, state) => ({
      handovers: state.storage.sql.exec<{ kind: string; cleared: number }>("SELECT kind, cleared_at IS NOT NULL AS cleared FROM handovers").toArray(),
      settings: state.storage.sql.exec<{ kind: string; agent: string }>("SELECT kind, agent FROM settings ORDER BY kind, agent").toArray(),
      agents: state.storage.sql.exec<{ agent: string; deleted: number }>("SELECT agent, deleted_at IS NOT NULL AS deleted FROM agents ORDER BY agent").toArray(),
    }));
    expect(held).toEqual({
      handovers: [{ kind: "settings and agents", cleared: 1 }],
      settings: [
        { kind: "models", agent: "" },
        { kind: "mounts", agent: "old" },
        { kind: "secondMessage", agent: "old" },
      ],
      agents: [
        { agent: "gone", deleted: 1 },
        { agent: "old", deleted: 0 },
      ],
    });

    // The version goes on from the old one: a change is 8, pushed to the live agent alone.
    expect(parseSettings(await agentSettings(env, { tenant, agent: "old" })).version).toBe(7);
    const changed = await api("PUT", `/tenants/${tenant}/second-message`, { strategy: "interrupt" });
    expect(await changed.json()).toEqual({ ok: true, strategy: "interrupt", agents: 1 });
    expect(parseSettings(await agentSettings(env, { tenant, agent: "old" })).version).toBe(8);

    // Asked once: a row written there now (by an isolate of the release before, say) is not read.
    await runInDurableObject(controlPlane(env), (_instance, state) => {
      state.storage.sql.exec("INSERT INTO settings (namespace, key, value, updated_at) VALUES ('secondMessage', ?, '\"reject\"', 0)", `${tenant}/old`);
    });
    expect(parseSettings(await agentSettings(env, { tenant, agent: "old" })).secondMessage).toEqual({ tenant: "interrupt", agent: "queue" });
  });

  it("an agent's first event registers it with its tenant's object, which tells the directory its name alone; its description stays in the tenant's object", async () => {
    const tenant = unique("reg");
    expect((await api("POST", `/tenants/${tenant}/agents`, { agent: "made", description: "Made through the API." })).status).toBe(201);
    await postMessage(tenant, "chat", { text: "hi", conversation: "c" });
    await settled(tenant, "chat", "c");
    expect(await listAgents(env, tenant)).toEqual([
      { tenant, agent: "chat", platform: "api", displayName: null, firstSeen: expect.any(Number) },
      { tenant, agent: "made", platform: "api", displayName: null, firstSeen: expect.any(Number) },
    ]);
    expect((await controlRows(tenant)).descriptions).toEqual([
      { agent: "chat", description: null },
      { agent: "made", description: null },
    ]);
    const agents = await tenantStub(env, tenant).agents(tenant);
    expect(agents.map((a) => [a.agent, a.description])).toEqual([
      ["chat", null],
      ["made", "Made through the API."],
    ]);
    // A tenant-wide change reaches both, from the tenant's own list.
    expect(await (await api("PUT", `/tenants/${tenant}/second-message`, { strategy: "queue" })).json()).toEqual({ ok: true, strategy: "queue", agents: 2 });
  });
});

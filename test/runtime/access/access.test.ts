// Who may do what through /v1 (runtime/access): scoped keys reach their tenant
// (and agent) only, a read-only key cannot write, a revoked key is refused,
// and every change lands in the append-only audit trail with its actor.
import { env } from "cloudflare:workers";
import { runInDurableObject } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { unique, waitFor } from "../../support.ts";
import { appendTenantAudit, tenantStub } from "../../../runtime/control/index.ts";
import { ADMIN, bearer, call, newKey } from "./helpers.ts";

const message = (text: string, conversation: string) => ({ text, conversation });

describe("scoped API keys", () => {
  const A = unique("acca");
  const B = unique("accb");

  it("the Responses API takes the same keys: its agent (named by model, or by the key) and its response ids are checked like a path's tenant", async () => {
    const [A, B] = [unique("respa"), unique("respb")];
    const { key } = await newKey(ADMIN, A, { name: "responses" });
    const scoped = await newKey(ADMIN, A, { name: "one agent", agent: "assistant" });
    const create = (auth: string, model: string) => call(auth, "POST", "/responses", { model, input: "hello", background: true });
    const made = await create(bearer(key), `${A}/assistant`);
    expect(made.status, await made.clone().text()).toBe(200);
    const { id } = (await made.json()) as { id: string };
    // Another tenant's agent, or a model naming no agent without a scoped key: nothing reached.
    expect((await create(bearer(key), `${B}/assistant`)).status).toBe(404);
    expect((await create(bearer(key), "gpt-4o")).status).toBe(400);
    // A key scoped to one agent: that agent, whatever the model says; another agent of its tenant is not its.
    const byScope = await create(bearer(scoped.key), "gpt-4o");
    expect(byScope.status).toBe(200);
    expect((await create(bearer(scoped.key), `${A}/other`)).status).toBe(404);
    // The response read and cancelled with the tenant's key; another tenant's key finds nothing.
    expect((await call(bearer(key), "GET", `/responses/${id}`)).status).toBe(200);
    const other = await newKey(ADMIN, B, { name: "b" });
    expect((await call(bearer(other.key), "GET", `/responses/${id}`)).status).toBe(404);
    expect((await call(bearer(other.key), "POST", `/responses/${id}/cancel`)).status).toBe(404);
    const refused = (await (await call(bearer(other.key), "GET", `/responses/${id}`)).json()) as { error: { message: string } };
    expect(refused.error.message).toMatch(/no route/);
  });

  it("a key works for its tenant, reaches nothing of another (404), and fails (401) once revoked", async () => {
    const { id, key } = await newKey(ADMIN, A, { name: "ci" });
    expect(key).toMatch(/^apk_k[0-9a-f]{12}_/);
    expect((await call(bearer(key), "POST", `/tenants/${A}/agents/assistant/messages`, message("hello", "c1"))).status).toBe(202);
    await waitFor("the reply", async () => {
      const res = await call(bearer(key), "GET", `/tenants/${A}/agents/assistant/conversations/c1`);
      return res.status === 200 && ((await res.json()) as { status: string }).status === "idle";
    });
    // B exists (the platform wrote to it), and A's key finds none of it.
    expect((await call(ADMIN, "POST", `/tenants/${B}/agents/assistant/messages`, message("hello", "c1"))).status).toBe(202);
    for (const [method, path, body] of [
      ["POST", `/tenants/${B}/agents/assistant/messages`, message("hi", "c2")],
      ["GET", `/tenants/${B}/agents/assistant/conversations/c1`],
      ["GET", `/tenants/${B}/agents/assistant/mounts`],
      ["PUT", `/tenants/${B}/limits`, { dailyUsd: 1 }],
      ["GET", `/tenants/${B}/usage`],
      ["GET", `/tenants/${B}/audit`],
      ["GET", `/tenants/${B}/keys`],
      ["PUT", `/webhook/tenants/${B}`, { callback_url: "https://example.com/x" }],
    ] as const) {
      const res = await call(bearer(key), method, path, body);
      expect([method, path, res.status]).toEqual([method, path, 404]);
    }
    // A tenantless route is the platform's, and so are the platform's admins.
    expect((await call(bearer(key), "GET", "/responses-of-nobody")).status).toBe(403);
    expect((await call(bearer(key), "PUT", "/tenants/*/roles/slack:T1:U9", { role: "admin" })).status).toBe(404);
    expect((await call(ADMIN, "PUT", "/tenants/*/roles/slack:T1:U9", { role: "admin" })).status).toBe(200);

    const listed = (await (await call(ADMIN, "GET", `/tenants/${A}/keys`)).json()) as { keys: Record<string, unknown>[] };
    expect(listed.keys).toHaveLength(1);
    expect(listed.keys[0]).toMatchObject({ id, name: "ci", access: "write", agent: null, revokedAt: null });
    expect(typeof listed.keys[0]!.lastUsedAt).toBe("number");
    // Stored hashed, shown once: no list carries the key or its hash.
    expect(JSON.stringify(listed)).not.toContain(key.slice(20));
    expect(Object.keys(listed.keys[0]!)).not.toContain("hash");

    expect((await call(ADMIN, "DELETE", `/tenants/${A}/keys/${id}`)).status).toBe(200);
    const after = await call(bearer(key), "GET", `/tenants/${A}/agents/assistant/conversations/c1`);
    expect(after.status).toBe(401);
    expect(await after.json()).toEqual({ error: "unknown or revoked API key" });
    expect((await call(ADMIN, "DELETE", `/tenants/${A}/keys/${id}`)).status).toBe(404);
  });

  it("a read-only key reads but cannot send a message or change a setting (403)", async () => {
    const { key } = await newKey(ADMIN, A, { name: "dashboard", access: "read" });
    expect((await call(bearer(key), "GET", `/tenants/${A}/usage`)).status).toBe(200);
    const sent = await call(bearer(key), "POST", `/tenants/${A}/agents/assistant/messages`, message("hi", "ro"));
    expect(sent.status).toBe(403);
    expect(await sent.json()).toEqual({ error: "this key is read-only" });
    expect((await call(bearer(key), "PUT", `/tenants/${A}/limits`, { dailyUsd: 1 })).status).toBe(403);
    expect((await call(ADMIN, "GET", `/tenants/${A}/agents/assistant/conversations/ro`)).status).toBe(404);
  });

  it("a key scoped to one agent reaches only that agent", async () => {
    const { key } = await newKey(ADMIN, A, { name: "bot", agent: "helper" });
    expect((await call(bearer(key), "GET", `/tenants/${A}/agents/helper/second-message`)).status).toBe(200);
    expect((await call(bearer(key), "GET", `/tenants/${A}/agents/assistant/second-message`)).status).toBe(404);
    expect((await call(bearer(key), "GET", `/tenants/${A}/usage`)).status).toBe(403);
  });

  it("only a tenant admin (or the platform) manages keys and roles, and only its own tenant's", async () => {
    const writer = await newKey(ADMIN, A, { name: "writer" });
    expect((await call(bearer(writer.key), "POST", `/tenants/${A}/keys`, { name: "more" })).status).toBe(403);
    const admin = await newKey(ADMIN, A, { name: "tenant admin", access: "admin" });
    const made = await newKey(bearer(admin.key), A, { name: "made by the tenant" });
    expect((await call(bearer(made.key), "GET", `/tenants/${A}/usage`)).status).toBe(200);
    expect((await call(bearer(admin.key), "POST", `/tenants/${B}/keys`, { name: "x" })).status).toBe(404);
    expect((await call(bearer(admin.key), "PUT", `/tenants/${A}/roles/slack:T1:U1`, { role: "member" })).status).toBe(200);
    expect((await call(bearer(admin.key), "PUT", `/tenants/${A}/roles/U1`, { role: "member" })).status).toBe(400);
    expect((await call(ADMIN, "POST", `/tenants/${A}/keys`, { name: "x", access: "admin", agent: "helper" })).status).toBe(400);
  });
});

describe("the audit trail", () => {
  it("every change through /v1 is a row: who, when, what, before and after; the rows cannot be edited", async () => {
    const T = unique("aud");
    const admin = await newKey(ADMIN, T, { name: "ops", access: "admin" });
    const k = bearer(admin.key);
    expect((await call(k, "PUT", `/tenants/${T}/limits`, { dailyUsd: 5 })).status).toBe(200);
    expect((await call(k, "PUT", `/tenants/${T}/limits`, { dailyUsd: 7 })).status).toBe(200);
    expect((await call(k, "PUT", `/tenants/${T}/model`, { model: "fake/test-model" })).status).toBe(200);
    expect((await call(k, "PUT", `/tenants/${T}/agents/assistant/mounts`, [{ alias: "clock2", plugin: "clock" }])).status).toBe(200);
    expect((await call(k, "PUT", `/tenants/${T}/agents/assistant/second-message`, { strategy: "queue" })).status).toBe(200);
    expect((await call(k, "POST", `/tenants/${T}/agents/assistant/messages`, message("plain", "c1"))).status).toBe(202);
    expect((await call(k, "POST", `/tenants/${T}/agents/assistant/messages`, { kind: "command", command: "compact", conversation: "c1" })).status).toBe(202);
    expect((await call(k, "POST", `/tenants/${T}/agents/assistant/messages`, { kind: "interrupt", conversation: "c1" })).status).toBe(202);
    expect((await call(k, "PUT", `/tenants/${T}/roles/slack:T1:U1`, { role: "admin" })).status).toBe(200);
    const made = await newKey(k, T, { name: "temp" });
    expect((await call(k, "DELETE", `/tenants/${T}/keys/${made.id}`)).status).toBe(200);
    // A refused change is no row.
    expect((await call(k, "PUT", `/tenants/${T}/limits`, { dailyUsd: -1 })).status).toBe(400);

    // A stop or a compact reaches the trail from the agent, which keeps it with the change until the control plane has it.
    type Entry = { actor: string; action: string; subject: string; before: unknown; after: unknown; at: string };
    const entries = await waitFor("the agent's rows", async () => {
      const res = await call(bearer(admin.key), "GET", `/tenants/${T}/audit`);
      expect(res.status).toBe(200);
      const { entries } = (await res.json()) as { entries: Entry[] };
      return entries.length >= 11 ? entries : undefined;
    });
    const actor = `key:${admin.id}`;
    const byChange = (rows: string[][]) => [...rows].sort((a, b) => a.join().localeCompare(b.join()));
    expect(byChange(entries.map((e) => [e.actor, e.action]))).toEqual(
      byChange([
        [ADMIN_ACTOR, "key.create"],
        [actor, "limits.set"],
        [actor, "limits.set"],
        [actor, "model.set"],
        [actor, "mounts.set"],
        [actor, "second-message.set"],
        [actor, "conversation.compact"],
        [actor, "conversation.stop"],
        [actor, "role.set"],
        [actor, "key.create"],
        [actor, "key.revoke"],
      ]),
    );
    expect(entries.find((e) => e.action === "conversation.stop")).toMatchObject({ subject: "agents/assistant/conversations/c1", after: { conversation: "c1" } });
    const limits = entries.filter((e) => e.action === "limits.set").reverse();
    expect(limits.map((e) => [e.before, e.after])).toEqual([
      [null, { dailyUsd: 5 }],
      [{ dailyUsd: 5, exempt: false }, { dailyUsd: 7 }],
    ]);
    expect(entries.find((e) => e.action === "role.set")).toMatchObject({ subject: "slack:T1:U1", before: null, after: "admin" });
    expect(entries.find((e) => e.action === "second-message.set")).toMatchObject({ subject: `/tenants/${T}/agents/assistant/second-message`, before: null, after: { strategy: "queue" } });
    expect(Number.isNaN(Date.parse(entries[0]!.at))).toBe(false);

    // Never editable: SQLite itself refuses to change or remove a row of the tenant's trail, in its own object.
    await runInDurableObject(tenantStub(env, T), (_instance, state) => {
      expect(() => state.storage.sql.exec("UPDATE audit SET actor = 'someone else'")).toThrow(/append-only/);
      expect(() => state.storage.sql.exec("DELETE FROM audit")).toThrow(/append-only/);
    });
  });

  it("a tenant's bounds, a role or a setting changed through /v1 and its row are written together: while the trail cannot be written, they do not change", async () => {
    const T = unique("aud");
    const admin = await newKey(ADMIN, T, { name: "ops", access: "admin" });
    const k = bearer(admin.key);
    const tenant = tenantStub(env, T);
    const tenantModel = async () => ((await (await call(k, "GET", `/tenants/${T}/agents/assistant/model`)).json()) as { tenant: unknown }).tenant;
    // The tenant's trail refuses rows, as a failing store would: SQLite aborts the insert.
    await runInDurableObject(tenant, (_instance, state) => {
      state.storage.sql.exec("CREATE TRIGGER audit_broken BEFORE INSERT ON audit BEGIN SELECT RAISE(ABORT, 'the trail is broken for this test'); END");
    });
    try {
      const bounds = await call(ADMIN, "PUT", `/tenants/${T}/bounds`, { maxDailyUsd: 3, models: null });
      expect([bounds.status, await bounds.json()]).toEqual([503, { error: expect.stringMatching(/could not be saved with their audit row; nothing changed/) }]);
      expect(await (await call(ADMIN, "GET", `/tenants/${T}/bounds`)).json()).toMatchObject({ maxDailyUsd: null });
      const role = await call(k, "PUT", `/tenants/${T}/roles/slack:T1:U9`, { role: "member" });
      expect([role.status, await role.json()]).toEqual([503, { error: expect.stringMatching(/could not be saved with its audit row; nothing changed/) }]);
      expect(await (await call(k, "GET", `/tenants/${T}/roles`)).json()).toEqual({ roles: [] });
      const setting = await call(k, "PUT", `/tenants/${T}/model`, { model: "fake/test-model" });
      expect([setting.status, await setting.json()]).toEqual([503, { error: expect.stringMatching(/could not be saved with its audit row; nothing changed/) }]);
      expect(await tenantModel()).toBeNull();
    } finally {
      await runInDurableObject(tenant, (_instance, state) => void state.storage.sql.exec("DROP TRIGGER audit_broken"));
    }
    expect((await call(k, "PUT", `/tenants/${T}/model`, { model: "fake/test-model" })).status).toBe(200);
    expect(await tenantModel()).toEqual({ model: "fake/test-model" });
    const { entries } = (await (await call(k, "GET", `/tenants/${T}/audit`)).json()) as { entries: { action: string; before: unknown; after: unknown }[] };
    // The setting refused while the trail was broken was never made: the one after names no value before.
    expect(entries.filter((e) => e.action === "model.set")).toEqual([expect.objectContaining({ before: null, after: { model: "fake/test-model" } })]);
  });

  it("a change appended under its key (an agent's audit effect) is one row however often its courier appends it", async () => {
    const T = unique("aud");
    const entry = { tenant: T, actor: "slack:T1:U1", action: "conversation.stop", subject: "agents/assistant/conversations/c1", before: null, after: { status: "idle" }, key: unique("effect") };
    await appendTenantAudit(env, entry);
    await appendTenantAudit(env, entry);
    await appendTenantAudit(env, { ...entry, key: unique("effect") });
    const { entries } = (await (await call(ADMIN, "GET", `/tenants/${T}/audit`)).json()) as { entries: Record<string, unknown>[] };
    expect(entries.map((e) => [e.actor, e.action, e.subject])).toEqual(Array(2).fill([entry.actor, entry.action, entry.subject]));
    // The key is the trail's own bookkeeping, not part of the row a reader sees.
    expect(Object.keys(entries[0]!).sort()).toEqual(["action", "actor", "after", "at", "before", "seq", "subject", "tenant"]);
  });
});

const ADMIN_ACTOR = "platform:admin-token";

describe("the platform's bounds for a tenant's admins", () => {
  it("a tenant's admin key is refused a limit above the ceiling or a model not allowed (403 naming the bound), through every route that sets one; the platform is not bound", async () => {
    const T = unique("bounds");
    const admin = bearer((await newKey(ADMIN, T, { name: "ops", access: "admin" })).key);
    // No bounds yet: any limit, any model the deployment knows.
    expect(await (await call(admin, "GET", `/tenants/${T}/bounds`)).json()).toEqual({ tenant: T, maxDailyUsd: null, models: null });
    expect((await call(admin, "PUT", `/tenants/${T}/limits`, { dailyUsd: 50 })).status).toBe(200);
    // Only the platform sets bounds; its change is in the trail.
    expect((await call(admin, "PUT", `/tenants/${T}/bounds`, { maxDailyUsd: 100 })).status).toBe(403);
    const set = await call(ADMIN, "PUT", `/tenants/${T}/bounds`, { maxDailyUsd: 10, models: ["local"] });
    expect(set.status, await set.clone().text()).toBe(200);
    expect(await (await call(admin, "GET", `/tenants/${T}/bounds`)).json()).toEqual({ tenant: T, maxDailyUsd: 10, models: ["local"] });

    const refusals: [string, string, unknown, RegExp][] = [
      ["PUT", `/tenants/${T}/limits`, { dailyUsd: 12 }, /caps this tenant's daily spend limit at 10 USD: 12 is above it/],
      ["PUT", `/tenants/${T}/limits`, { dailyUsd: 5, exempt: true }, /at 10 USD: set a limit of at most 10/],
      ["PUT", `/tenants/${T}/limits`, { dailyUsd: null }, /at 10 USD/],
      ["DELETE", `/tenants/${T}/limits`, undefined, /at 10 USD/],
      ["PUT", `/tenants/${T}/model`, { model: "fake/test-model" }, /model "fake\/test-model" is not on the models the platform allows this tenant \(local\)/],
      ["PUT", `/tenants/${T}/agents/a/model`, { model: "fake/test-model" }, /not on the models/],
      ["POST", `/tenants/${T}/agents`, { agent: "made", model: { model: "fake/test-model" } }, /not on the models/],
    ];
    for (const [method, path, body, words] of refusals) {
      const res = await call(admin, method, path, body);
      expect([method, path, res.status]).toEqual([method, path, 403]);
      expect(((await res.json()) as { error: string }).error).toMatch(words);
    }
    // Nothing of a refused change was kept: the limit is the one set before the bounds, no agent was made.
    expect(((await (await call(admin, "GET", `/tenants/${T}/limits`)).json()) as { own: unknown }).own).toEqual({ dailyUsd: 50, exempt: false });
    expect((await call(admin, "GET", `/tenants/${T}/agents/made`)).status).toBe(404);
    // Within the bounds: allowed.
    expect((await call(admin, "PUT", `/tenants/${T}/limits`, { dailyUsd: 10 })).status).toBe(200);
    expect((await call(admin, "PUT", `/tenants/${T}/model`, { model: "local" })).status).toBe(200);
    // The platform is not bound.
    expect((await call(ADMIN, "PUT", `/tenants/${T}/limits`, { dailyUsd: 500 })).status).toBe(200);
    expect((await call(ADMIN, "PUT", `/tenants/${T}/model`, { model: "fake/test-model" })).status).toBe(200);
    const trail = ((await (await call(ADMIN, "GET", `/tenants/${T}/audit`)).json()) as { entries: { actor: string; action: string; before: unknown; after: unknown }[] }).entries;
    expect(trail.find((e) => e.action === "bounds.set")).toMatchObject({ actor: "platform:admin-token", before: null, after: { maxDailyUsd: 10, models: ["local"] } });
    // Removed: no ceiling again.
    expect((await call(ADMIN, "DELETE", `/tenants/${T}/bounds`)).status).toBe(200);
    expect((await call(admin, "PUT", `/tenants/${T}/limits`, { dailyUsd: 80 })).status).toBe(200);
  });
});

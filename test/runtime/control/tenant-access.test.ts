// Tenants apart for roles, the audit trail, bounds and people's names (issue
// 39): each lives in the tenant's own object, never in the deployment-wide
// control plane; a person's index of tenants says where they hold a role,
// and the role itself is read from the tenant's object. A deployment that ran
// the release before has these rows in the control plane: each is served
// through the move and moved once, the trail with its order and dedupe keys.
import { env } from "cloudflare:workers";
import { runInDurableObject } from "cloudflare:test";
import { afterEach, describe, expect, it, vi } from "vitest";
import { ControlPlane, controlPlane, peopleNames, rememberPerson, rolesHeldBy } from "../../../runtime/index.ts";
import { appendTenantAudit, tenantStub } from "../../../runtime/control/index.ts";
import { slackId } from "../../bridges/slack/helpers.ts";
import { unique } from "../../support.ts";
import { ADMIN, call } from "../access/helpers.ts";

afterEach(() => {
  vi.restoreAllMocks();
});

/** Every call made to a control plane method from now on, by name. */
function watchControlPlane(): () => string[] {
  const calls: string[] = [];
  for (const name of Object.getOwnPropertyNames(ControlPlane.prototype)) {
    const method = (ControlPlane.prototype as unknown as Record<string, unknown>)[name];
    if (name === "constructor" || typeof method !== "function") continue;
    vi.spyOn(ControlPlane.prototype as unknown as Record<string, (...args: unknown[]) => unknown>, name).mockImplementation(function (this: unknown, ...args: unknown[]) {
      calls.push(name);
      return (method as (...args: unknown[]) => unknown).apply(this, args);
    });
  }
  return () => calls;
}

/** What the control plane keeps of a tenant: its roles, trail rows, bounds, and the names of people of its team. */
function controlRows(tenant: string): Promise<{ roles: number; audit: number; bounds: number; people: number }> {
  return runInDurableObject(controlPlane(env), (_instance, state) => {
    const count = (query: string, ...args: string[]) => state.storage.sql.exec<{ n: number }>(query, ...args).one().n;
    return {
      roles: count("SELECT COUNT(*) AS n FROM roles WHERE tenant = ?", tenant),
      audit: count("SELECT COUNT(*) AS n FROM audit WHERE tenant = ?", tenant),
      bounds: count("SELECT COUNT(*) AS n FROM settings WHERE namespace = 'bounds' AND key = ?", tenant),
      people: count("SELECT COUNT(*) AS n FROM people WHERE identity LIKE ?", `slack:${tenant}:%`),
    };
  });
}

/** The tenant's own object's rows of the same. */
function tenantRows(tenant: string): Promise<{ roles: string[]; audit: string[]; bounds: string[]; people: string[] }> {
  return runInDurableObject(tenantStub(env, tenant), (_instance, state) => {
    const column = (query: string) => state.storage.sql.exec<{ v: string }>(query).toArray().map((r) => r.v);
    return {
      roles: column("SELECT identity || '=' || role AS v FROM roles ORDER BY identity"),
      audit: column("SELECT action AS v FROM audit ORDER BY seq"),
      bounds: column("SELECT value AS v FROM records WHERE kind = 'bounds'"),
      people: column("SELECT identity || '=' || name AS v FROM people ORDER BY identity"),
    };
  });
}

type Entry = { seq: number; actor: string; action: string; subject: string; before: unknown; after: unknown };
const trail = async (tenant: string): Promise<Entry[]> => ((await (await call(ADMIN, "GET", `/tenants/${tenant}/audit`)).json()) as { entries: Entry[] }).entries;

describe("roles, the trail, bounds and names", () => {
  it("are kept in the tenant's own object and served from there: the control plane holds none of them", async () => {
    const T = slackId("T");
    const person = `slack:${T}:${slackId("U")}`;
    expect((await call(ADMIN, "PUT", `/tenants/${T}/roles/${person}`, { role: "admin" })).status).toBe(200);
    expect((await call(ADMIN, "PUT", `/tenants/${T}/bounds`, { maxDailyUsd: 4, models: null })).status).toBe(200);
    await rememberPerson(env, { identity: person, name: "Ada" });

    expect(await (await call(ADMIN, "GET", `/tenants/${T}/roles`)).json()).toEqual({ roles: [expect.objectContaining({ tenant: T, identity: person, role: "admin" })] });
    expect(await (await call(ADMIN, "GET", `/tenants/${T}/bounds`)).json()).toEqual({ tenant: T, maxDailyUsd: 4, models: null });
    expect((await trail(T)).map((e) => e.action)).toEqual(["bounds.set", "role.set"]);
    expect(await peopleNames(env, [person])).toEqual({ [person]: "Ada" });
    expect(await rolesHeldBy(env, [person])).toEqual([expect.objectContaining({ tenant: T, identity: person, role: "admin" })]);

    expect(await tenantRows(T)).toEqual({ roles: [`${person}=admin`], audit: ["role.set", "bounds.set"], bounds: [JSON.stringify({ maxDailyUsd: 4, models: null })], people: [`${person}=Ada`] });
    expect(await controlRows(T)).toEqual({ roles: 0, audit: 0, bounds: 0, people: 0 });
  });

  it("the platform's admins (tenant `*`) are kept in an object of their own, found as any role is", async () => {
    const person = `slack:${slackId("T")}:${slackId("U")}`;
    expect((await call(ADMIN, "PUT", `/tenants/*/roles/${person}`, { role: "admin" })).status).toBe(200);
    expect((await rolesHeldBy(env, [person])).map((r) => [r.tenant, r.role])).toEqual([["*", "admin"]]);
    expect((await tenantRows("*")).roles).toContain(`${person}=admin`);
    expect((await controlRows("*")).roles).toBe(0);
  });

  it("a role taken away is refused at the very next look-up, even where the person's index still lists the tenant", async () => {
    const [T, other] = [unique("rolegone"), unique("rolekept")];
    const person = `discord:${slackId("G")}:${slackId("U")}`;
    expect((await call(ADMIN, "PUT", `/tenants/${T}/roles/${person}`, { role: "member" })).status).toBe(200);
    expect((await call(ADMIN, "PUT", `/tenants/${other}/roles/${person}`, { role: "admin" })).status).toBe(200);
    expect((await rolesHeldBy(env, [person])).map((r) => [r.tenant, r.role]).sort()).toEqual([[T, "member"], [other, "admin"]].sort());

    expect((await call(ADMIN, "DELETE", `/tenants/${T}/roles/${person}`)).status).toBe(200);
    expect((await rolesHeldBy(env, [person])).map((r) => [r.tenant, r.role])).toEqual([[other, "admin"]]);
    expect(await (await call(ADMIN, "GET", `/tenants/${T}/roles`)).json()).toEqual({ roles: [] });
    // Taking it away twice is a 404: there is none.
    expect((await call(ADMIN, "DELETE", `/tenants/${T}/roles/${person}`)).status).toBe(404);

    // An index that still lists the tenant (its unlisting failed) finds no role there: the tenant's object is asked each time.
    const index = env.PERSON_ROLES.get(env.PERSON_ROLES.idFromName(person));
    await runInDurableObject(index, (_instance, state) => void state.storage.sql.exec("INSERT INTO tenants (tenant, listed_at) VALUES (?, 0)", T));
    expect((await rolesHeldBy(env, [person])).map((r) => [r.tenant, r.role])).toEqual([[other, "admin"]]);
  });
});

describe("rows the release before kept in the control plane", () => {
  it("are served through the move, then held by the tenant's object alone, each kind moved once; the trail keeps its order and dedupe keys", async () => {
    const [T, untouched] = [slackId("T"), slackId("T")];
    const [ada, bob, eve] = [`slack:${T}:${slackId("U")}`, `slack:${T}:${slackId("U")}`, `slack:${untouched}:${slackId("U")}`];
    const effect = unique("effect");
    // The rows as the release before wrote them.
    await runInDurableObject(controlPlane(env), (_instance, state) => {
      const sql = state.storage.sql;
      const role = "INSERT INTO roles (tenant, identity, role, granted_at, granted_by) VALUES (?, ?, ?, 1, 'platform:admin-token')";
      sql.exec(role, T, ada, "admin");
      sql.exec(role, T, bob, "member");
      sql.exec(role, untouched, eve, "admin");
      const row = "INSERT INTO audit (tenant, at, actor, action, subject, before, after, dedupe) VALUES (?, ?, 'platform:admin-token', ?, ?, NULL, ?, ?)";
      sql.exec(row, T, 1, "role.set", ada, '"admin"', null);
      sql.exec(row, untouched, 2, "role.set", eve, '"admin"', null);
      sql.exec(row, T, 3, "conversation.stop", "agents/a/conversations/c", '{"status":"idle"}', effect);
      sql.exec(row, T, 4, "role.set", bob, '"member"', null);
      sql.exec("INSERT INTO settings (namespace, key, value, updated_at) VALUES ('bounds', ?, ?, 1)", T, JSON.stringify({ maxDailyUsd: 9, models: ["local"] }));
      const name = "INSERT INTO people (identity, name, updated_at) VALUES (?, ?, 1)";
      sql.exec(name, ada, "Ada");
      sql.exec(name, bob, "Bob");
      sql.exec(name, eve, "Eve");
    });
    const oldSeqs = await runInDurableObject(controlPlane(env), (_instance, state) =>
      state.storage.sql.exec<{ seq: number }>("SELECT seq FROM audit WHERE tenant = ? ORDER BY seq DESC", T).toArray().map((r) => r.seq),
    );
    expect(await controlRows(T)).toEqual({ roles: 2, audit: 3, bounds: 1, people: 2 });

    // A person's index taken over after the tenant's roles were: the tenant listed them first, so the role is found.
    const asked = watchControlPlane();
    const [roles, firstTrail] = await Promise.all([call(ADMIN, "GET", `/tenants/${T}/roles`), trail(T)]);
    expect(((await roles.json()) as { roles: { identity: string; role: string }[] }).roles.map((r) => [r.identity, r.role])).toEqual([[ada, "admin"], [bob, "member"]].sort());
    expect(firstTrail.map((e) => [e.seq, e.action])).toEqual(oldSeqs.map((seq, i) => [seq, ["role.set", "conversation.stop", "role.set"][i]]));
    expect(await (await call(ADMIN, "GET", `/tenants/${T}/bounds`)).json()).toEqual({ tenant: T, maxDailyUsd: 9, models: ["local"] });
    expect(await peopleNames(env, [ada, bob])).toEqual({ [ada]: "Ada", [bob]: "Bob" });
    expect((await rolesHeldBy(env, [bob])).map((r) => [r.tenant, r.role])).toEqual([[T, "member"]]);

    // Each kind was read from the control plane once, then cleared there.
    for (const read of ["oldRoles", "oldAudit", "oldPeople", "clearOldRoles", "clearOldAudit", "clearOldPeople"]) expect([read, asked().filter((n) => n === read).length]).toEqual([read, 1]);
    expect(await controlRows(T)).toEqual({ roles: 0, audit: 0, bounds: 0, people: 0 });
    // Another tenant's rows stay until its own object takes them: a person's index finds that tenant's role there, and its object takes it.
    expect(await controlRows(untouched)).toEqual({ roles: 1, audit: 1, bounds: 0, people: 1 });
    expect((await rolesHeldBy(env, [eve])).map((r) => [r.tenant, r.role])).toEqual([[untouched, "admin"]]);
    expect(await peopleNames(env, [ada, eve])).toEqual({ [ada]: "Ada", [eve]: "Eve" });
    expect(await controlRows(untouched)).toEqual({ roles: 0, audit: 1, bounds: 0, people: 0 });

    // A courier's append repeated after the move, under the old row's key, is still one row; later rows come after the old ones.
    const retried = { tenant: T, actor: "slack:T1:U1", action: "conversation.stop", subject: "agents/a/conversations/c", before: null, after: { status: "idle" }, key: effect };
    await appendTenantAudit(env, retried);
    await appendTenantAudit(env, { ...retried, key: unique("effect") });
    const after = await trail(T);
    expect(after.filter((e) => e.action === "conversation.stop")).toHaveLength(2);
    expect(after[0]!.seq).toBeGreaterThan(oldSeqs[0]!);
    expect(after.slice(1).map((e) => e.seq)).toEqual(oldSeqs);

    // Served again, the control plane is not asked.
    const calls = asked().length;
    await Promise.all([call(ADMIN, "GET", `/tenants/${T}/roles`), trail(T), call(ADMIN, "GET", `/tenants/${T}/bounds`), peopleNames(env, [ada])]);
    expect(asked().slice(calls)).toEqual([]);
    expect((await tenantRows(T)).people).toEqual([`${ada}=Ada`, `${bob}=Bob`].sort());
  });
});

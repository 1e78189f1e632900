// An upgrade from the control plane a deployment of the release before left
// (test/fixtures/upgrade/control.sql, dumped from its real SQLite with the
// tenants' own objects: two Slack workspaces and a webhook tenant with keys of
// both kinds, roles, a trail, secrets, settings, bounds, names, agents'
// descriptions and console sessions). This code boots on it, and each
// tenant's data is served through the public surfaces, once (but a console
// session, which is dropped: its person signs in again); afterwards the
// control plane names none of the tenants but in the directory (issue 39).
// Each kind of data is its own test, so a failure names the kind.
import { env } from "cloudflare:workers";
import { runInDurableObject } from "cloudflare:test";
import { beforeAll, describe, expect, it } from "vitest";
import fixture from "../../fixtures/upgrade/control.sql?raw";
import { CALLBACK_URL_MARK, type ControlFixtureTenant } from "../../fixtures/upgrade/control-fixture.ts";
import { controlPlane, tenantStub } from "../../../runtime/control/index.ts";
import { signatureHeaders } from "../../../bridges/shared/signed-request.ts";
import { signingSecret } from "../../../bridges/webhook/secrets.ts";
import { postMessage, script, settled, worker } from "../../support.ts";
import { finished, hook, message } from "../../bridges/webhook/helpers.ts";
import { grantOauthCode, messageEnvelope, newTs, postEvent, slackCalls, slackId, statusFinal } from "../../bridges/slack/helpers.ts";
import { ADMIN, bearer, call } from "../access/helpers.ts";

const E = env as unknown as Record<string, string>;
/** The deploy comes this long after the dump. */
const DEPLOY_AFTER_MS = 5 * 60_000;

const TENANTS = JSON.parse(/^-- tenants: (.*)$/m.exec(fixture)![1]!) as ControlFixtureTenant[];
/** Each store's dump, by `<binding> <name>`. */
const STORES = new Map(
  fixture
    .split(/^-- store: /m)
    .slice(1)
    .map((part) => [part.slice(0, part.indexOf("\n")), part.slice(part.indexOf("\n") + 1).replaceAll(CALLBACK_URL_MARK, E.FAKE_CALLBACK_URL!)]),
);

type AuditEntry = { at: string; actor: string; action: string; subject: string; before: unknown; after: unknown };
/** Each tenant's trail as the release before left it, oldest first, read from the loaded dump before anything was served. */
const oldTrail = new Map<string, AuditEntry[]>();

/** Every table but SQLite's own and the runtime's. */
const tablesOf = (sql: SqlStorage) => sql.exec<{ name: string }>("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' AND name NOT LIKE '_cf_%'").toArray().map((t) => t.name);

/** Replaces a store's tables with its dump, times moved so the dump was taken DEPLOY_AFTER_MS ago, then restarts it on this code. */
async function load(object: DurableObjectStub, dump: string, shift: number): Promise<void> {
  await runInDurableObject(object, (_instance, state) => {
    const sql = state.storage.sql;
    for (const table of tablesOf(sql)) sql.exec(`DROP TABLE "${table}"`);
    sql.exec(dump);
    // Times are ms since the epoch in columns named at, *_at and *_since, and in a console session's expiry;
    // the trail's stay as written (it refuses an UPDATE), in the past anyway.
    for (const table of tablesOf(sql).filter((name) => name !== "audit")) {
      for (const { name: column } of sql.exec<{ name: string }>(`PRAGMA table_info("${table}")`).toArray()) {
        if (/^(at|.*_at|.*_since)$/.test(column)) sql.exec(`UPDATE "${table}" SET "${column}" = "${column}" + ? WHERE "${column}" IS NOT NULL`, shift);
      }
    }
    if (tablesOf(sql).includes("settings")) {
      sql.exec("UPDATE settings SET value = json_set(value, '$.expiresAt', json_extract(value, '$.expiresAt') + ?) WHERE namespace = 'console-sessions'", shift);
    }
  });
  await runInDurableObject(object, (_instance, state) => state.abort("restarted on this code by the test")).catch(() => undefined);
}

beforeAll(async () => {
  const shift = Date.now() - DEPLOY_AFTER_MS - Number(/^-- dumped_at: (\d+)$/m.exec(fixture)![1]);
  await load(controlPlane(env), STORES.get("CONTROL control")!, shift);
  for (const { tenant } of TENANTS) await load(tenantStub(env, tenant), STORES.get(`TENANT ${tenant}`)!, shift);
  for (const { tenant } of TENANTS) {
    const rows = await runInDurableObject(controlPlane(env), (_instance, state) =>
      state.storage.sql.exec<{ at: number; actor: string; action: string; subject: string; before: string | null; after: string | null }>("SELECT at, actor, action, subject, before, after FROM audit WHERE tenant = ? ORDER BY seq", tenant).toArray(),
    );
    oldTrail.set(
      tenant,
      rows.map((r) => ({ at: new Date(r.at).toISOString(), actor: r.actor, action: r.action, subject: r.subject, before: r.before === null ? null : JSON.parse(r.before), after: r.after === null ? null : JSON.parse(r.after) })),
    );
  }
});

async function json<T>(res: Response): Promise<T> {
  expect(res.status, await res.clone().text()).toBe(200);
  return res.json() as Promise<T>;
}

/** A tenant's whole trail through /v1, oldest first. */
async function trailOf(tenant: string): Promise<AuditEntry[]> {
  const { entries } = await json<{ entries: AuditEntry[] }>(await call(ADMIN, "GET", `/tenants/${tenant}/audit?limit=500`));
  return entries.reverse();
}

describe("after an upgrade from the control plane the release before left", () => {
  it.each(TENANTS.filter((t) => t.platform === "slack"))("Slack workspace $tenant's installation is served: an event is answered with its own bot token", async ({ tenant, botToken }) => {
    // The fake Slack forgot the tokens it granted with its last process: it is taught this one again, outside the runtime.
    const code = slackId("code");
    await grantOauthCode(code, { team: tenant, token: botToken!, botUserId: "UFAKEBOT" });
    const taught = await fetch(`${E.FAKE_SLACK_URL}/api/oauth.v2.access`, { method: "POST", body: new URLSearchParams({ code, client_id: E.SLACK_CLIENT_ID!, client_secret: E.SLACK_CLIENT_SECRET! }) });
    expect(((await taught.json()) as { ok: boolean }).ok).toBe(true);

    const channel = slackId("C");
    const s = `upgraded-slack-${tenant}`;
    await script(s, [{ text: "Answered after the upgrade." }]);
    expect((await postEvent(messageEnvelope({ team: tenant, channel, ts: newTs(), text: `[s:${s}] hello` }))).status).toBe(200);
    await statusFinal(channel, "Done.");
    const calls = await slackCalls(channel);
    expect(calls.length).toBeGreaterThan(0);
    expect(new Set(calls.map((c) => c.token))).toEqual(new Set([botToken]));
  });

  it.each(TENANTS.filter((t) => t.platform === "webhook"))("webhook tenant $tenant's own secret verifies its events and its callback gets the answer", async ({ tenant }) => {
    const s = `upgraded-webhook-${tenant}`;
    await script(s, [{ text: "Called back after the upgrade." }]);
    const body = JSON.stringify({ tenant, ...message("after", `[s:${s}] hello`) });
    // The tenant's own secret, derived from the nonce its object keeps: the fake checks the callbacks with it.
    const secret = await signingSecret(env, tenant);
    expect(secret).not.toBe(E.WEBHOOK_SECRET);
    await fetch(`${E.FAKE_CALLBACK_URL}/_control/hooks/${tenant}`, { method: "PUT", body: JSON.stringify({ secret }) });
    const res = await worker(`/webhook/${tenant}/events`, { method: "POST", headers: { "content-type": "application/json", ...(await signatureHeaders(secret!, body)) }, body });
    expect(res.status, await res.clone().text()).toBe(202);
    const deliveries = await finished(tenant);
    expect(deliveries.filter((d) => d.body.type === "reply" && d.body.text === "Called back after the upgrade.")).toHaveLength(1);
    expect((await hook(tenant)).deliveries.every((d) => d.signatureValid)).toBe(true);
  });

  it.each(TENANTS)("$tenant's keys: the old and the new authenticate, each listed once, and no other tenant's", async ({ tenant, oldKey, newKey }) => {
    const keys = [oldKey, ...(newKey === null ? [] : [newKey])];
    for (const key of keys) expect((await call(bearer(key), "GET", `/tenants/${tenant}/keys`)).status).toBe(200);
    for (const other of TENANTS.filter((t) => t.tenant !== tenant)) expect((await call(bearer(oldKey), "GET", `/tenants/${other.tenant}/keys`)).status).toBe(404);
    const { keys: listed } = await json<{ keys: { id: string; name: string }[] }>(await call(ADMIN, "GET", `/tenants/${tenant}/keys`));
    expect(listed.map((k) => k.name).sort()).toEqual([`old-key-${TENANTS.findIndex((t) => t.tenant === tenant)}-${tenant}`, ...(newKey === null ? [] : [`new-key-${TENANTS.findIndex((t) => t.tenant === tenant)}-${tenant}`])].sort());
  });

  it.each(TENANTS)("$tenant's roles are served once", async ({ tenant, person }) => {
    const { roles } = await json<{ roles: { identity: string; role: string }[] }>(await call(ADMIN, "GET", `/tenants/${tenant}/roles`));
    const member = person.identity.replace(/:[^:]+$/, `:UMEMBER${TENANTS.findIndex((t) => t.tenant === tenant)}`);
    expect(roles.map((r) => [r.identity, r.role])).toEqual([
      [person.identity, "admin"],
      [member, "member"],
    ]);
  });

  it.each(TENANTS)("$tenant's audit trail: every old row, once, in order, and a change made now after them", async ({ tenant }) => {
    const old = oldTrail.get(tenant)!;
    expect(old.length).toBeGreaterThanOrEqual(10);
    expect((await call(ADMIN, "PUT", `/tenants/${tenant}/roles/slack:TNEW:UAFTER`, { role: "member" })).status).toBe(200);
    const trail = await trailOf(tenant);
    expect(trail.slice(0, old.length).map(({ at, actor, action, subject, before, after }) => ({ at, actor, action, subject, before, after }))).toEqual(old);
    expect(trail.slice(old.length).map((e) => [e.action, e.subject])).toEqual([["role.set", "slack:TNEW:UAFTER"]]);
  });

  it.each(TENANTS)("$tenant's secrets are listed", async ({ tenant, secret }) => {
    const { secrets } = await json<{ secrets: { name: string }[] }>(await call(ADMIN, "GET", `/tenants/${tenant}/secrets`));
    expect(secrets.map((s) => s.name)).toEqual([secret]);
  });

  it.each(TENANTS)("$tenant's settings (the tenant's model and mounts, the agent's model and second message) are served and reach its agent", async ({ tenant }) => {
    const i = TENANTS.findIndex((t) => t.tenant === tenant);
    const model = await json<{ effective: { model: string }; tenant: { model: string } | null; agent: { model: string } | null }>(await call(ADMIN, "GET", `/tenants/${tenant}/agents/helper/model`));
    expect([model.tenant?.model, model.agent?.model, model.effective.model]).toEqual(["fake/test-model", "local", "local"]);
    const { mounts } = await json<{ mounts: { alias: string }[] }>(await call(ADMIN, "GET", `/tenants/${tenant}/agents/helper/mounts`));
    expect(mounts.map((m) => m.alias)).toContain(`clock${i}`);
    expect(JSON.stringify(await json(await call(ADMIN, "GET", `/tenants/${tenant}/agents/helper/second-message`)))).toContain("queue");
    // The agent's object, new after the upgrade, takes its copy: the local model answers.
    expect((await postMessage(tenant, "helper", { text: "hello after the upgrade", conversation: "after" })).status).toBe(202);
    expect((await settled(tenant, "helper", "after")).status).toBe("idle");
  });

  it.each(TENANTS)("$tenant's bounds are served", async ({ tenant }) => {
    const i = TENANTS.findIndex((t) => t.tenant === tenant);
    expect(await json(await call(ADMIN, "GET", `/tenants/${tenant}/bounds`))).toEqual({ tenant, maxDailyUsd: 10 + i, models: ["fake/test-model", "local"] });
  });

  it.each(TENANTS)("$tenant's agent keeps its description", async ({ tenant, description }) => {
    expect(await json(await call(ADMIN, "GET", `/tenants/${tenant}/agents/helper`))).toMatchObject({ agent: "helper", description });
  });

  it.each(TENANTS)("$tenant's person signs in again (a session of the release before is dropped, not moved); the tenant's page shows its people by name", async ({ tenant, person, session }) => {
    const home = await worker("/console", { headers: { cookie: session }, redirect: "manual" });
    expect([home.status, home.headers.get("location")]).toEqual([303, expect.stringContaining("/console/login")]);
    const page = await worker(`/console/tenants/${tenant}`, { headers: { authorization: ADMIN }, redirect: "manual" });
    expect(page.status).toBe(200);
    expect(await page.text()).toContain(`title="${person.identity}">${person.name}</span>`);
  });

  it("afterwards, the control plane names none of the tenants but in the directory's names (ids, names, platform, times)", async () => {
    // Every tenant's things were served above; what the control plane still holds of them.
    const marks = TENANTS.map((t) => ({ tenant: t.tenant, marks: [t.tenant, t.person.identity, t.person.name, t.description, t.secret] }));
    const held = await runInDurableObject(controlPlane(env), (_instance, state) => {
      const sql = state.storage.sql;
      // Each table.column holding a mark, with the tenants it names.
      const found: Record<string, string[]> = {};
      for (const table of tablesOf(sql)) {
        for (const row of sql.exec(`SELECT * FROM "${table}"`).toArray()) {
          for (const [column, value] of Object.entries(row)) {
            // The directory of names: a tenant's and agent's ids, its name, its platform, when first seen and deleted.
            if (table === "directory" && ["tenant", "agent", "platform", "display_name", "first_seen", "deleted_at"].includes(column)) continue;
            // The index of the keys an older release made: a key's hash and its tenant's id, which the key does not name (docs/design.md, "Access").
            if (table === "old_keys") continue;
            const text = String(value);
            for (const { tenant, marks: its } of marks) {
              if (its.some((mark) => text.includes(mark))) found[`${table}.${column}`] = [...new Set([...(found[`${table}.${column}`] ?? []), tenant])].sort();
            }
          }
        }
      }
      return found;
    });
    expect(held).toEqual({});
  });
});

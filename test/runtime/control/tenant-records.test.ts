// Tenants apart for the records a turn reads (issue 39): a workspace's bot
// token, a webhook tenant's secrets and callback, a workspace's refusal of
// streaming live in the tenant's own object, never in the deployment-wide
// control plane; a deployment that ran the release before has them in the
// control plane's settings, and each is served through the move and moved
// once; a withdrawn installation is refused at the next request.
import { env } from "cloudflare:workers";
import { runInDurableObject } from "cloudflare:test";
import { describe, expect, it, vi } from "vitest";
import { controlPlane, tenantRecord } from "../../../runtime/index.ts";
import { ControlPlane, tenantStub } from "../../../runtime/control/index.ts";
import { seal } from "../../../lib/sealed.ts";
import { tokenEncryptionKey } from "../../../bridges/slack/config.ts";
import { botTokenFor, withdrawInstallation } from "../../../bridges/slack/installations.ts";
import { callbackFor } from "../../../bridges/webhook/callbacks.ts";
import { signingSecret, verifyingSecrets } from "../../../bridges/webhook/secrets.ts";
import { agentExists } from "../../agents.ts";
import { script, unique, worker } from "../../support.ts";
import { registerCallback } from "../../bridges/webhook/helpers.ts";
import { AGENT, installWorkspace, messageEnvelope, newTs, postEvent, slackId, statusFinal } from "../../bridges/slack/helpers.ts";

const E = env as unknown as Record<string, string>;
const ADMIN = { authorization: "Bearer test-admin-token" };
/** The kinds of record moved, as the bridges name them (and the control plane's namespaces they were kept under). */
const KINDS = ["slack-installations", "slack-stream-refusals", "webhook-secrets", "webhook-callbacks"];


/** Every cell of every table of a store, as text, by table. */
function cellsOf(storage: DurableObjectStorage): Record<string, string> {
  const tables = storage.sql.exec<{ name: string }>("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' AND name NOT LIKE '_cf_%'").toArray();
  return Object.fromEntries(tables.map(({ name }) => [name, JSON.stringify(storage.sql.exec(`SELECT * FROM "${name}"`).toArray())]));
}

/** The control plane's settings rows of these kinds kept for any of `tenants`. */
function controlRows(tenants: string[]): Promise<{ namespace: string; key: string }[]> {
  return runInDurableObject(controlPlane(env), (_instance, state) =>
    state.storage.sql
      .exec<{ namespace: string; key: string }>(`SELECT namespace, key FROM settings WHERE namespace IN (${KINDS.map(() => "?").join(", ")})`, ...KINDS)
      .toArray()
      .filter((row) => tenants.includes(row.key)),
  );
}

/** Writes a row of the control plane's settings as the release before did (the kind as namespace, the tenant as key). */
function oldRow(namespace: string, key: string, value: unknown): Promise<void> {
  return runInDurableObject(controlPlane(env), (_instance, state) => {
    state.storage.sql.exec("INSERT OR REPLACE INTO settings (namespace, key, value, updated_at) VALUES (?, ?, ?, ?)", namespace, key, JSON.stringify(value), Date.now());
  });
}

/** The string values of a record longer than a word but the tenant's name (which the directory keeps): what would give it away (a sealed token, its iv, a nonce, a URL). */
function marksOf(tenant: string, value: unknown): string[] {
  if (typeof value === "string") return value.length >= 12 && value !== tenant ? [value] : [];
  if (value && typeof value === "object") return Object.values(value).flatMap((v) => marksOf(tenant, v));
  return [];
}

async function rotate(tenant: string): Promise<void> {
  const res = await worker(`/v1/webhook/tenants/${tenant}/secret`, { method: "POST", headers: { ...ADMIN, "content-type": "application/json" }, body: "{}" });
  expect(res.status, await res.clone().text()).toBe(201);
}

describe("a tenant's records", () => {
  it("live in the tenant's own object only: the control plane holds none, and each tenant's object holds its own tenant's alone", async () => {
    const workspaces = [slackId("T"), slackId("T"), slackId("T")];
    for (const team of workspaces) await installWorkspace({ team });
    const hooks = [unique("wh"), unique("wh"), unique("wh")];
    for (const tenant of hooks) {
      await rotate(tenant);
      await registerCallback(tenant);
    }
    // The first workspace refuses streaming: its refusal is remembered where its token is.
    const channel = slackId("C");
    await fetch(`${E.FAKE_SLACK_URL}/_control/refuse-streaming`, { method: "POST", body: JSON.stringify({ channel }) });
    const s = unique("refused");
    await script(s, [{ text: "A reply streamed as the model writes it, so long that the courier opens it before it ends: refused here, it is posted and edited.", argumentChunk: 6, chunkDelayMs: 150 }]);
    expect((await postEvent(messageEnvelope({ team: workspaces[0]!, channel, ts: newTs(), text: `[s:${s}] hello` }))).status).toBe(200);
    await statusFinal(channel, "Done.");

    const expected: Record<string, string[]> = {
      [workspaces[0]!]: ["slack-installations", "slack-stream-refusals"],
      [workspaces[1]!]: ["slack-installations"],
      [workspaces[2]!]: ["slack-installations"],
      ...Object.fromEntries(hooks.map((tenant) => [tenant, ["webhook-callbacks", "webhook-secrets"]])),
    };
    const tenants = Object.keys(expected);
    const marks: Record<string, string[]> = {};
    for (const tenant of tenants) {
      const held = await runInDurableObject(tenantStub(env, tenant), (_instance, state) => ({
        identity: state.storage.sql.exec<{ tenant: string }>("SELECT tenant FROM identity").toArray(),
        records: state.storage.sql.exec<{ kind: string; value: string }>("SELECT kind, value FROM records ORDER BY kind").toArray(),
        cells: Object.values(cellsOf(state.storage)).join("\n"),
      }));
      expect([tenant, held.identity]).toEqual([tenant, [{ tenant }]]);
      expect([tenant, held.records.map((r) => r.kind)]).toEqual([tenant, expected[tenant]]);
      marks[tenant] = held.records.flatMap((r) => marksOf(tenant, JSON.parse(r.value)));
      // No other tenant's name is anywhere in this tenant's object.
      for (const other of tenants.filter((t) => t !== tenant)) expect(held.cells.includes(other), `${other} in ${tenant}'s object`).toBe(false);
    }
    // A sealed token, its iv, a nonce, a callback URL: each tenant's are its own.
    for (const tenant of tenants) expect(marks[tenant]!.length).toBeGreaterThan(0);

    expect(await controlRows(tenants)).toEqual([]);
    // The trail, which records a callback's registration as it records every change, is the tenant's own object's too.
    const control = await runInDurableObject(controlPlane(env), (_instance, state) => cellsOf(state.storage));
    for (const [table, cells] of Object.entries(control)) {
      for (const tenant of tenants) for (const mark of marks[tenant]!) expect(cells.includes(mark), `${tenant}'s ${mark} in the control plane's ${table}`).toBe(false);
    }
  });

  it("kept in the control plane by the release before are served through the move, then held by the tenant's object alone, each moved once", async () => {
    const team = slackId("T");
    const hookTenant = unique("wh");
    // The rows as the release before wrote them: the settings table, the kind as namespace, the tenant as key.
    const token = `xoxb-${slackId("")}`;
    const { iv, sealed } = await seal(tokenEncryptionKey(env), "antiproton/slack/bot-token", team, token);
    const installation = { tenant: team, teamId: team, enterpriseId: null, botUserId: "UFAKEBOT", installedAt: Date.now(), iv, token: sealed };
    const refusal = { until: Date.now() + 60_000, error: "chat.startStream: not_allowed" };
    const secrets = { current: { nonce: slackId("nonce"), createdAt: Date.now() }, previous: null };
    const callback = { callback_url: `${E.FAKE_CALLBACK_URL}/hooks/${hookTenant}` };
    await oldRow("slack-installations", team, installation);
    await oldRow("slack-stream-refusals", team, refusal);
    await oldRow("webhook-secrets", hookTenant, secrets);
    await oldRow("webhook-callbacks", hookTenant, callback);

    // Served, by several first requests at once (the object takes each row over once).
    const tokens = await Promise.all([botTokenFor(env, team), botTokenFor(env, team), tenantRecord(env, team, "slack-stream-refusals")]);
    expect(tokens).toEqual([token, token, refusal]);
    const [verifying, signing, registered] = await Promise.all([verifyingSecrets(env, hookTenant), signingSecret(env, hookTenant), callbackFor(env, hookTenant)]);
    expect(verifying).toEqual([signing]);
    expect(signing).not.toBe(E.WEBHOOK_SECRET);
    expect(registered).toEqual(callback);

    // Moved: the control plane holds none of them, each tenant's object holds its own once.
    expect(await controlRows([team, hookTenant])).toEqual([]);
    for (const [tenant, kinds] of [[team, ["slack-installations", "slack-stream-refusals"]], [hookTenant, ["webhook-callbacks", "webhook-secrets"]]] as const) {
      const held = await runInDurableObject(tenantStub(env, tenant), (_instance, state) => ({
        records: state.storage.sql.exec<{ kind: string }>("SELECT kind FROM records ORDER BY kind").toArray().map((r) => r.kind),
        handovers: state.storage.sql.exec<{ kind: string; cleared: number }>("SELECT kind, cleared_at IS NOT NULL AS cleared FROM handovers ORDER BY kind").toArray(),
      }));
      expect(held).toEqual({ records: kinds, handovers: kinds.map((kind) => ({ kind, cleared: 1 })) });
    }
    // The served values are the moved ones, and still served after the move.
    expect(await tenantRecord(env, team, "slack-installations")).toEqual(installation);
    expect(await botTokenFor(env, team)).toBe(token);

    // Asked once: a row written there now (by an isolate of the release before, say) is not read, and what the tenant wrote wins.
    await oldRow("webhook-callbacks", hookTenant, { callback_url: `${E.FAKE_CALLBACK_URL}/hooks/elsewhere` });
    expect(await callbackFor(env, hookTenant)).toEqual(callback);
    await controlPlane(env).delete("webhook-callbacks", hookTenant);
  });

  it("a tenant made on this release asks the control plane once whether it holds anything of the tenant's, and then never, whatever is touched, woken again or not", async () => {
    const T = unique("new");
    const methods = Object.getOwnPropertyNames(ControlPlane.prototype).filter((name) => name !== "constructor") as (keyof ControlPlane)[];
    const spies = methods.map((name) => [name, vi.spyOn(ControlPlane.prototype, name)] as const);
    const asked = () => Object.fromEntries(spies.map(([name, spy]) => [name, spy.mock.calls.length]).filter(([, calls]) => calls !== 0));
    const touchAll = async () => {
      const tenant = tenantStub(env, T);
      await tenant.record(T, "webhook-secrets");
      await tenant.keys(T);
      await tenant.roles(T);
      await tenant.audit(T, 10);
      await tenant.namesOf(T, [`slack:${T}:U1`]);
      await tenant.settings(T, "assistant");
    };
    try {
      await touchAll();
      expect(asked()).toEqual({ holdsOlderRows: 1 });
      await runInDurableObject(tenantStub(env, T), (_instance, state) => state.abort("evicted by the test")).catch(() => undefined);
      await touchAll();
      expect(asked()).toEqual({ holdsOlderRows: 1 });
    } finally {
      spies.forEach(([, spy]) => spy.mockRestore());
    }
  });

  it("a first write that comes while the old row is being taken over waits for it: the row is copied once and does not replace the write", async () => {
    const tenant = unique("wh");
    const old = { callback_url: `${E.FAKE_CALLBACK_URL}/hooks/old` };
    const fresh = { callback_url: `${E.FAKE_CALLBACK_URL}/hooks/${tenant}` };
    const asked: string[] = [];
    await runInDurableObject(tenantStub(env, tenant), async (instance) => {
      // The control plane as the release before left it, its first answer held back: the write comes while the read waits for it.
      let answer!: () => void;
      const held = new Promise<void>((resolve) => (answer = resolve));
      const control = {
        holdsOlderRows: async () => true,
        get: async (kind: string) => (asked.push(`get ${kind}`) === 1 && (await held), old),
        delete: async (kind: string) => (asked.push(`delete ${kind}`), true),
      };
      const own = instance as unknown as { env: Env };
      const real = own.env;
      own.env = { ...real, CONTROL: { idFromName: () => "control", get: () => control } } as unknown as Env;
      try {
        const read = instance.record(tenant, "webhook-callbacks");
        const write = instance.putRecord(tenant, "webhook-callbacks", JSON.stringify(fresh));
        answer();
        expect(JSON.parse((await read)!)).toEqual(old);
        await write;
      } finally {
        own.env = real;
      }
    });
    expect(asked).toEqual(["get webhook-callbacks", "delete webhook-callbacks"]);
    expect(await callbackFor(env, tenant)).toEqual(fresh);
  });

  it("a withdrawn installation is refused at the very next request: no token, and its next event runs nothing", async () => {
    const team = slackId("T");
    const token = await installWorkspace({ team });
    expect(await botTokenFor(env, team)).toBe(token);
    expect(await withdrawInstallation(env, team, null)).toBe(true);
    expect(await botTokenFor(env, team)).toBeNull();
    const s = unique("withdrawn");
    await script(s, [{ text: "never" }]);
    expect((await postEvent(messageEnvelope({ team, channel: slackId("C"), ts: newTs(), text: `[s:${s}] hello` }))).status).toBe(200);
    expect(await agentExists(team, AGENT)).toBe(false);
  });
});

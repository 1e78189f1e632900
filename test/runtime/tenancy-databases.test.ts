// Tenants apart all the way down (issue 39): after a run that installs three
// Slack workspaces through OAuth, gives three webhook tenants their own
// secret and callback, makes keys, roles, secrets, bounds, limits and settings
// for all six, signs their people in to the console and drives turns through
// Slack, the webhook and the Agents API, every object's SQLite of every
// namespace is read whole, and no database may hold two tenants' marks (their
// names and the distinctive things given them), but the control plane's
// directory of names (ids, names, platform, times). Each namespace is its own
// test, so a failure names where two tenants meet.
import { env } from "cloudflare:workers";
import { listDurableObjectIds, runInDurableObject } from "cloudflare:test";
import { beforeAll, describe, expect, it } from "vitest";
import { signatureHeaders } from "../../bridges/shared/signed-request.ts";
import { signingSecret } from "../../bridges/webhook/secrets.ts";
import { script, settled, unique, worker } from "../support.ts";
import { finished, message, registerCallback } from "../bridges/webhook/helpers.ts";
import { installWorkspace, messageEnvelope, newTs, postEvent, slackId, statusFinal } from "../bridges/slack/helpers.ts";
import { ADMIN, bearer, call, newKey } from "./access/helpers.ts";
import { signInAs } from "../console/sign-in.ts";

const E = env as unknown as Record<string, string>;

/** A tenant of the run, named in failures by its label, and the strings that would give its rows away. */
interface RunTenant {
  label: string;
  tenant: string;
  platform: "slack" | "webhook";
  marks: string[];
}

const TENANTS: RunTenant[] = [];

/**
 * Every namespace of the deployment (each Durable Object binding, so a class
 * added later is read too; the test pool's own `__VITEST_POOL_WORKERS_*`
 * services aside) but MACHINE: a machine is a container the run never starts
 * (no turn here leases one), and waking one to read it would start one.
 */
const BINDINGS = Object.entries(env)
  .filter(([name, value]) => !name.startsWith("__") && name !== "MACHINE" && typeof (value as Partial<DurableObjectNamespace>).idFromName === "function")
  .map(([name]) => name)
  .sort();

/**
 * Where every tenant of the run has rows of its own (its agents, its ledger,
 * its object), so the look is shown to find them; the others may hold none
 * once done (a courier's finished tasks, a pace in memory, a gate, the control plane's names).
 */
const EACH_TENANT_HERE: readonly string[] = ["AGENT", "LEDGER", "TENANT"];

/** The control plane's directory of names: these columns may name every tenant. */
const DIRECTORY_NAMES = ["tenant", "agent", "platform", "display_name", "first_seen", "deleted_at"];

async function ok(res: Response, status = 200): Promise<Response> {
  expect(res.status, await res.clone().text()).toBe(status);
  return res;
}

/** One tenant's run: its chat, then what every tenant is given, then a turn through its chat and one through the Agents API with its own key. */
async function runTenant(label: string, platform: "slack" | "webhook"): Promise<RunTenant> {
  const tenant = platform === "slack" ? slackId("T") : unique("dbwh");
  const teamName = `Workspace of ${label} ${tenant}`;
  if (platform === "slack") await installWorkspace({ team: tenant, teamName });
  else {
    await ok(await call(ADMIN, "POST", `/webhook/tenants/${tenant}/secret`, {}), 201);
    await registerCallback(tenant);
    await fetch(`${E.FAKE_CALLBACK_URL}/_control/hooks/${tenant}`, { method: "PUT", body: JSON.stringify({ secret: await signingSecret(env, tenant) }) });
  }
  const keyName = `key of ${label} ${tenant}`;
  const { key } = await newKey(ADMIN, tenant, { name: keyName, access: "admin" });
  const [team, user] = platform === "slack" ? [tenant, "UADMIN"] : [slackId("T"), "UHOOK"];
  const person = { identity: `slack:${team}:${user}`, name: `Person of ${label} ${tenant}` };
  await ok(await call(ADMIN, "PUT", `/tenants/${tenant}/roles/${person.identity}`, { role: "admin" }));
  const secret = `SECRET_${tenant.toUpperCase()}`;
  await ok(await call(bearer(key), "PUT", `/tenants/${tenant}/secrets/${secret}`, { value: `value of ${label} ${tenant}` }));
  await ok(await call(ADMIN, "PUT", `/tenants/${tenant}/bounds`, { maxDailyUsd: 50, models: ["fake/test-model", "local"] }));
  await ok(await call(bearer(key), "PUT", `/tenants/${tenant}/limits`, { dailyUsd: 20 }));
  await ok(await call(bearer(key), "PUT", `/tenants/${tenant}/model`, { model: "fake/test-model" }));
  const description = `Helper of ${label} ${tenant}`;
  await ok(await call(bearer(key), "POST", `/tenants/${tenant}/agents`, { agent: "helper", description, model: { model: "local" } }), 201);
  await ok(await call(bearer(key), "PUT", `/tenants/${tenant}/agents/helper/mounts`, [{ alias: `clock${tenant.toLowerCase()}`, plugin: "clock" }]));
  await ok(await call(bearer(key), "PUT", `/tenants/${tenant}/agents/helper/second-message`, { strategy: "queue" }));
  await signInAs(team, user, person.name);

  const s = unique("dbturn");
  const said = `words of ${label} ${tenant}`;
  await script(s, [{ text: `answer to ${label} ${tenant}` }]);
  if (platform === "slack") {
    const channel = slackId("C");
    await ok(await postEvent(messageEnvelope({ team: tenant, channel, ts: newTs(), text: `[s:${s}] ${said}`, user })));
    await statusFinal(channel, "Done.");
  } else {
    const body = JSON.stringify({ tenant, ...message("chat", `[s:${s}] ${said}`) });
    await ok(await worker(`/webhook/${tenant}/events`, { method: "POST", headers: { "content-type": "application/json", ...(await signatureHeaders((await signingSecret(env, tenant))!, body)) }, body }), 202);
    await finished(tenant);
  }
  await ok(await call(bearer(key), "POST", `/tenants/${tenant}/agents/helper/messages`, { text: `api words of ${label} ${tenant}`, conversation: "api" }), 202);
  await settled(tenant, "helper", "api");
  return { label, tenant, platform, marks: [tenant, keyName, person.identity, person.name, secret, description, said, teamName] };
}

/** Every table's rows of an object's SQLite, as text per table and column, and its key-value entries (SQLite's `_cf_KV`) as table "kv". */
async function cellsOf(storage: DurableObjectStorage): Promise<{ table: string; column: string; text: string }[]> {
  const sql = storage.sql;
  const tables = sql.exec<{ name: string }>("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' AND name NOT LIKE '_cf_%'").toArray();
  const rows = tables.flatMap(({ name: table }) =>
    sql
      .exec(`SELECT * FROM "${table}"`)
      .toArray()
      .flatMap((row) => Object.entries(row).map(([column, value]) => ({ table, column, text: value instanceof ArrayBuffer ? new TextDecoder().decode(value) : String(value) }))),
  );
  const entries = [...(await storage.list())].map(([key, value]) => ({ table: "kv", column: key, text: `${key} ${JSON.stringify(value)}` }));
  return [...rows, ...entries];
}

/** What an object is, for a failure: its name where the run can tell it (a tenant's object, a ledger, the control plane), else its id. */
function nameOf(namespace: DurableObjectNamespace, id: DurableObjectId): string {
  const names = ["control", "platform", ...TENANTS.flatMap((t) => [t.tenant, `tenant:${t.tenant}`, `${t.tenant}:assistant`, `${t.tenant}:helper`])];
  const found = names.find((name) => namespace.idFromName(name).equals(id));
  if (found === undefined) return id.toString().slice(0, 12);
  return TENANTS.reduce((text, t) => text.replaceAll(t.tenant, `<${t.label}>`), found);
}

/** For each table of each object of the namespace that holds marks of two tenants or more: where, and whose. */
async function sharedTables(binding: (typeof BINDINGS)[number]): Promise<{ objects: number; tenantsSeen: Set<string>; shared: string[] }> {
  const namespace = (env as unknown as Record<string, DurableObjectNamespace>)[binding]!;
  const ids = await listDurableObjectIds(namespace);
  const tenantsSeen = new Set<string>();
  const shared: string[] = [];
  for (const id of ids) {
    const cells = await runInDurableObject(namespace.get(id), (_instance, state) => cellsOf(state.storage));
    const byTable = new Map<string, Set<string>>();
    for (const { table, column, text } of cells) {
      if (binding === "CONTROL" && table === "directory" && DIRECTORY_NAMES.includes(column)) continue;
      for (const t of TENANTS) {
        if (!t.marks.some((mark) => text.includes(mark))) continue;
        tenantsSeen.add(t.label);
        byTable.set(table, (byTable.get(table) ?? new Set()).add(t.label));
      }
    }
    for (const [table, tenants] of byTable) if (tenants.size > 1) shared.push(`${binding} ${nameOf(namespace, id)}: table ${table} holds ${[...tenants].sort().join(", ")}`);
  }
  return { objects: ids.length, tenantsSeen, shared: shared.sort() };
}

beforeAll(async () => {
  for (const [i, platform] of (["slack", "slack", "slack", "webhook", "webhook", "webhook"] as const).entries()) TENANTS.push(await runTenant(`${platform}${i % 3}`, platform));
}, 120_000);

describe("no database of the deployment holds two tenants' rows, but the control plane's directory of names", () => {
  it("reads every namespace: the agents, the control plane, the tenants, the people's indexes, the sessions, the ledgers, …", () => {
    expect(BINDINGS).toEqual(expect.arrayContaining(["AGENT", "CONSOLE_SESSION", "CONTROL", "COURIER", "LEDGER", "PERSON_ROLES", "PROVIDER_GATE", "SEND_PACE", "TENANT"]));
  });

  it.each(BINDINGS)("%s", async (binding) => {
    const { objects, tenantsSeen, shared } = await sharedTables(binding);
    expect(shared).toEqual([]);
    if (EACH_TENANT_HERE.includes(binding)) {
      expect(objects).toBeGreaterThanOrEqual(TENANTS.length);
      expect([...tenantsSeen].sort()).toEqual(TENANTS.map((t) => t.label).sort());
    }
  });
});

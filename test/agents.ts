// Reaching the real AgentObject from a test: stubs, eviction, and its tables.
import { env } from "cloudflare:workers";
import { listDurableObjectIds, runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import type { AgentObject } from "../runtime/object/index.ts";
import { courierStub } from "../runtime/courier/index.ts";
import type { EffectCarriers, EffectKind, EffectMessage } from "../runtime/effects/index.ts";
import { migrate } from "../runtime/object/index.ts";
import { type AuditRow, tenantAudit } from "../runtime/control/index.ts";
import { waitFor } from "./support.ts";

export function agent(tenant: string, name: string): DurableObjectStub<AgentObject> {
  const ns = env.AGENT as DurableObjectNamespace<AgentObject>;
  return ns.get(ns.idFromName(`${tenant}:${name}`));
}

/**
 * Whether the object of (tenant, agent) has stored anything. It asks the
 * namespace, not the object, so asking creates nothing.
 */
export async function agentExists(tenant: string, name: string): Promise<boolean> {
  const id = agent(tenant, name).id;
  return (await listDurableObjectIds(env.AGENT)).some((stored) => stored.equals(id));
}

/**
 * Resets the object (as an eviction or crash would): in-memory state is gone,
 * SQLite stays. A fresh instance must answer afterwards (else the eviction
 * proved nothing).
 */
export async function evict(tenant: string, name: string): Promise<void> {
  const before = await runInDurableObject(agent(tenant, name), (instance) => instance);
  await runInDurableObject(agent(tenant, name), (_instance, state) => state.abort("evicted by the test")).catch(() => undefined);
  const after = await runInDurableObject(agent(tenant, name), (instance) => instance);
  if (after === before) throw new Error("the object was not evicted");
}

/** The courier of one lane of an agent (the lane of `kind` effects of `conversation`). */
export function courier(tenant: string, name: string, kind: EffectKind, conversation: string) {
  return courierStub(env, { tenant, agent: name, lane: `${kind === "hold" ? "tool" : kind}:${conversation}` });
}

/** Couriers that take nothing (a hand-off fails at once): what a pass sends goes on the queue, where a test can hold it. */
export const noCouriers: EffectCarriers["couriers"] = {
  idFromName: (name) => ({ name }) as unknown as DurableObjectId,
  get: () => ({ take: () => Promise.reject(new Error("no courier takes effects in this test")) }),
};

/** The real couriers, each hand-off seen first by `onward`, which says what goes on to them (the rest is held). */
export function couriersThrough(onward: (effects: EffectMessage[]) => EffectMessage[]): EffectCarriers["couriers"] {
  const real = env.COURIER;
  return {
    idFromName: (name) => real.idFromName(name),
    get: (id) => ({
      take: async (effects) => {
        const passed = onward(effects);
        if (passed.length > 0) await real.get(id).take(passed);
      },
    }),
  };
}

/** Resets a courier mid-work, as a crash would; its watchdog alarm is left to resume it. */
export async function evictCourier(stub: ReturnType<typeof courier>): Promise<void> {
  await runInDurableObject(stub, (_instance, state) => state.abort("evicted by the test")).catch(() => undefined);
}

/** Runs the object's pending alarm now (on a fresh instance after an eviction). */
export function fireAlarm(tenant: string, name: string): Promise<boolean> {
  return runDurableObjectAlarm(agent(tenant, name));
}

export function rows<T extends Record<string, SqlStorageValue>>(tenant: string, name: string, query: string, ...args: SqlStorageValue[]): Promise<T[]> {
  return runInDurableObject(agent(tenant, name), (_instance, state) => state.storage.sql.exec<T>(query, ...args).toArray());
}

/** Every row of every table of the object, as text: what a leak check searches. */
export function storedText(tenant: string, name: string): Promise<string> {
  return runInDurableObject(agent(tenant, name), (_instance, state) => {
    const names = state.storage.sql.exec<{ name: string }>("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE '_cf_%'").toArray();
    return names.map(({ name: table }) => JSON.stringify(state.storage.sql.exec(`SELECT * FROM "${table}"`).toArray())).join("\n");
  });
}

export function alarmOf(tenant: string, name: string): Promise<number | null> {
  return runInDurableObject(agent(tenant, name), (_instance, state) => state.storage.getAlarm());
}

/** An object's own tables: none at all for an object that was never written to. */
export function tablesOf(stub: DurableObjectStub<AgentObject>): Promise<string[]> {
  return runInDurableObject(stub, (_instance, state) =>
    state.storage.sql.exec<{ name: string }>("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE '_cf_%'").toArray().map((r) => r.name),
  );
}

/** A storage's schema (tables and indexes, as sqlite_master holds them), without the platform's own: what a migration changes. */
export function schemaOf(storage: DurableObjectStorage): string[] {
  return storage.sql
    .exec<{ type: string; name: string; sql: string }>("SELECT type, name, sql FROM sqlite_master WHERE name NOT LIKE 'sqlite_%' AND name NOT LIKE '_cf_%' AND sql IS NOT NULL")
    .toArray()
    .map((entry) => `${entry.type} ${entry.name}: ${entry.sql}`)
    .sort();
}

export function tables(tenant: string, name: string): Promise<string[]> {
  return tablesOf(agent(tenant, name));
}

/** Runs `fn` inside a fresh object, over its real storage, with the schema in place. */
export function inObject<T>(fn: (storage: DurableObjectStorage) => T | Promise<T>): Promise<T> {
  return runInDurableObject(agent("parts", crypto.randomUUID()), async (_instance, state) => {
    migrate(state.storage);
    return fn(state.storage);
  });
}

/**
 * A tenant's audit trail, oldest first, once the agent's object has nothing
 * left to append: a change it recorded (a retry's duplicate included) would be
 * in its audit outbox until the tenant's object has it, so no row is still on its way.
 */
export async function auditOnceAppended(tenant: string, name: string): Promise<AuditRow[]> {
  await waitFor("the agent's audit outbox to be empty", async () =>
    runInDurableObject(agent(tenant, name), (_instance, state) => state.storage.sql.exec<{ n: number }>("SELECT COUNT(*) AS n FROM audit_outbox").one().n === 0),
  );
  return (await tenantAudit(env, tenant, 500)).reverse();
}

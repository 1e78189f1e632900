// Reaching the real AgentObject from a test: stubs, eviction, and its tables.
import { env } from "cloudflare:workers";
import { runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import type { AgentObject } from "../runtime/agent-object.ts";

export function agent(tenant: string, name: string): DurableObjectStub<AgentObject> {
  const ns = env.AGENT as DurableObjectNamespace<AgentObject>;
  return ns.get(ns.idFromName(`${tenant}:${name}`));
}

/** Resets the object (as an eviction or crash would): in-memory state is gone, SQLite stays. */
export async function evict(tenant: string, name: string): Promise<void> {
  await runInDurableObject(agent(tenant, name), (_instance, state) => state.abort("evicted by the test")).catch(() => undefined);
}

/** Runs the object's pending alarm now (on a fresh instance after an eviction). */
export function fireAlarm(tenant: string, name: string): Promise<boolean> {
  return runDurableObjectAlarm(agent(tenant, name));
}

export function rows<T extends Record<string, SqlStorageValue>>(tenant: string, name: string, query: string, ...args: SqlStorageValue[]): Promise<T[]> {
  return runInDurableObject(agent(tenant, name), (_instance, state) => state.storage.sql.exec<T>(query, ...args).toArray());
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

export function tables(tenant: string, name: string): Promise<string[]> {
  return tablesOf(agent(tenant, name));
}

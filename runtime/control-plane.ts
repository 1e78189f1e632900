// The control plane: one Durable Object (named "control") holding settings that
// are not one agent's: Slack installations, webhook callback URLs, per-tenant
// overrides, the directory of tenants and agents. Values are JSON; anything
// secret is encrypted by its owner before it is stored here.
import { DurableObject } from "cloudflare:workers";
import { agentListing, DIRECTORY_SCHEMA, recordEntry, tenantListing, type AgentListing, type DirectoryEntry, type TenantListing } from "./directory.ts";

export class ControlPlane extends DurableObject<Env> {
  private readonly sql: SqlStorage;

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    this.sql = ctx.storage.sql;
    this.sql.exec(
      "CREATE TABLE IF NOT EXISTS settings (namespace TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL, updated_at INTEGER NOT NULL, PRIMARY KEY (namespace, key))",
    );
    this.sql.exec(DIRECTORY_SCHEMA);
  }

  async get<T = unknown>(namespace: string, key: string): Promise<T | null> {
    const row = this.sql.exec<{ value: string }>("SELECT value FROM settings WHERE namespace = ? AND key = ?", namespace, key).toArray()[0];
    return row ? (JSON.parse(row.value) as T) : null;
  }

  async put(namespace: string, key: string, value: unknown): Promise<void> {
    this.sql.exec(
      "INSERT INTO settings (namespace, key, value, updated_at) VALUES (?, ?, ?, ?) ON CONFLICT (namespace, key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at",
      namespace,
      key,
      JSON.stringify(value),
      Date.now(),
    );
  }

  async delete(namespace: string, key: string): Promise<boolean> {
    return this.sql.exec("DELETE FROM settings WHERE namespace = ? AND key = ?", namespace, key).rowsWritten > 0;
  }

  async list<T = unknown>(namespace: string): Promise<{ key: string; value: T }[]> {
    return this.sql
      .exec<{ key: string; value: string }>("SELECT key, value FROM settings WHERE namespace = ? ORDER BY key", namespace)
      .toArray()
      .map((r) => ({ key: r.key, value: JSON.parse(r.value) as T }));
  }

  // ---- the directory (runtime/directory.ts) ----

  async recordAgent(entry: DirectoryEntry): Promise<void> {
    recordEntry(this.sql, entry, Date.now());
  }

  async tenants(): Promise<TenantListing[]> {
    return tenantListing(this.sql);
  }

  async agents(tenant?: string): Promise<AgentListing[]> {
    return agentListing(this.sql, tenant);
  }
}

export function controlPlane(env: Env): DurableObjectStub<ControlPlane> {
  const namespace = env.CONTROL as DurableObjectNamespace<ControlPlane>;
  return namespace.get(namespace.idFromName("control"));
}

// The tenant's own object: one Durable Object per tenant, its own SQLite, for
// what is the tenant's and no one else's. Today that is its secrets (API
// tokens for its mounts, its own model keys), kept sealed: the Worker seals a
// value before it arrives here and opens it where it is used, so this
// database never holds one in clear (runtime/control/tenant-secrets.ts).
import { DurableObject } from "cloudflare:workers";
import { type Migration, runMigrations } from "../../lib/migrations.ts";
import type { Sealed } from "../../lib/sealed.ts";

/** Append-only (lib/migrations.ts). */
const MIGRATIONS: readonly Migration[] = [
  {
    name: "identity, sealed secrets",
    sql: `CREATE TABLE identity (tenant TEXT NOT NULL);
CREATE TABLE secrets (name TEXT PRIMARY KEY, iv TEXT NOT NULL, sealed TEXT NOT NULL, created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL, updated_by TEXT NOT NULL);`,
  },
];

/** A secret as anyone may see it: its name and dates, never its value. */
export interface SecretListing {
  name: string;
  createdAt: number;
  updatedAt: number;
  updatedBy: string;
}


export class Tenant extends DurableObject<Env> {
  private readonly sql: SqlStorage;

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    this.sql = ctx.storage.sql;
    runMigrations(ctx.storage, MIGRATIONS);
  }

  /** The object serves the tenant it first served, and refuses any other (invariant 4). */
  private claim(tenant: string): void {
    const row = this.sql.exec<{ tenant: string }>("SELECT tenant FROM identity").toArray()[0];
    if (!row) this.sql.exec("INSERT INTO identity (tenant) VALUES (?)", tenant);
    else if (row.tenant !== tenant) throw new Error(`this object is tenant ${row.tenant}'s, not ${tenant}'s`);
  }

  /** Sets (or replaces) a secret; returns its listing. */
  async putSecret(tenant: string, name: string, value: Sealed, actor: string): Promise<SecretListing> {
    this.claim(tenant);
    const now = Date.now();
    this.sql.exec(
      `INSERT INTO secrets (name, iv, sealed, created_at, updated_at, updated_by) VALUES (?, ?, ?, ?, ?, ?)
       ON CONFLICT (name) DO UPDATE SET iv = excluded.iv, sealed = excluded.sealed, updated_at = excluded.updated_at, updated_by = excluded.updated_by`,
      name,
      value.iv,
      value.sealed,
      now,
      now,
      actor,
    );
    return this.listings(name)[0]!;
  }

  /** Whether a secret by that name was there to delete. */
  async deleteSecret(tenant: string, name: string): Promise<boolean> {
    this.claim(tenant);
    return this.sql.exec("DELETE FROM secrets WHERE name = ? RETURNING name", name).toArray().length > 0;
  }

  async secrets(tenant: string): Promise<SecretListing[]> {
    this.claim(tenant);
    return this.listings();
  }

  /** The sealed values of those of `names` the tenant has (a courier opens them). */
  async sealedSecrets(tenant: string, names: string[]): Promise<Record<string, Sealed>> {
    this.claim(tenant);
    const found: Record<string, Sealed> = {};
    for (const name of names) {
      const row = this.sql.exec<{ iv: string; sealed: string }>("SELECT iv, sealed FROM secrets WHERE name = ?", name).toArray()[0];
      if (row) found[name] = { iv: row.iv, sealed: row.sealed };
    }
    return found;
  }

  /** Every secret's listing, or the one named. */
  private listings(name?: string): SecretListing[] {
    const where = name === undefined ? "" : " WHERE name = ?";
    return this.sql
      .exec<{ name: string; created_at: number; updated_at: number; updated_by: string }>(`SELECT name, created_at, updated_at, updated_by FROM secrets${where} ORDER BY name`, ...(name === undefined ? [] : [name]))
      .toArray()
      .map((r) => ({ name: r.name, createdAt: r.created_at, updatedAt: r.updated_at, updatedBy: r.updated_by }));
  }
}

export function tenantStub(env: Env, tenant: string): DurableObjectStub<Tenant> {
  const namespace = env.TENANT as DurableObjectNamespace<Tenant>;
  return namespace.get(namespace.idFromName(tenant));
}

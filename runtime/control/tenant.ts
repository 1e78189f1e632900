// The tenant's own object: one Durable Object per tenant, its own SQLite, for
// what is the tenant's and no one else's, so no deployment-wide object holds
// it or stands on a turn's way. Its secrets (API tokens for its mounts, its
// own model keys), kept sealed: the Worker seals a value before it arrives
// here and opens it where it is used, so this database never holds one in
// clear (runtime/control/tenant-secrets.ts). And its records: one JSON value
// per kind that a bridge keeps for the tenant and reads on a turn's way (a
// workspace's sealed bot token, a webhook tenant's secrets and callback); the
// bridge names the kind, the runtime none. A release before this one kept each
// record in the control plane's settings (namespace: the kind, key: the
// tenant); the first touch of a kind here takes it over from there, once.
import { DurableObject } from "cloudflare:workers";
import { type Migration, runMigrations } from "../../lib/migrations.ts";
import type { Sealed } from "../../lib/sealed.ts";
import { controlPlane } from "./control-plane.ts";

/** Append-only (lib/migrations.ts). */
const MIGRATIONS: readonly Migration[] = [
  {
    name: "identity, sealed secrets",
    sql: `CREATE TABLE identity (tenant TEXT NOT NULL);
CREATE TABLE secrets (name TEXT PRIMARY KEY, iv TEXT NOT NULL, sealed TEXT NOT NULL, created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL, updated_by TEXT NOT NULL);`,
  },
  {
    // handovers: a kind whose old row was copied here (copied_at) and then deleted from the control plane (cleared_at).
    name: "records, their handover from the control plane",
    sql: `CREATE TABLE records (kind TEXT PRIMARY KEY, value TEXT NOT NULL, updated_at INTEGER NOT NULL);
CREATE TABLE handovers (kind TEXT PRIMARY KEY, copied_at INTEGER NOT NULL, cleared_at INTEGER);`,
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
  /** The handover of each kind under way (takeOver): a call that comes meanwhile waits for it. */
  private readonly takingOver = new Map<string, Promise<void>>();

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

  /** The record of that kind as JSON, or null. */
  async record(tenant: string, kind: string): Promise<string | null> {
    this.claim(tenant);
    await this.takeOver(tenant, kind);
    return this.sql.exec<{ value: string }>("SELECT value FROM records WHERE kind = ?", kind).toArray()[0]?.value ?? null;
  }

  /** Sets (or replaces) the record of that kind; `value` is JSON. */
  async putRecord(tenant: string, kind: string, value: string): Promise<void> {
    this.claim(tenant);
    await this.takeOver(tenant, kind);
    this.sql.exec(
      "INSERT INTO records (kind, value, updated_at) VALUES (?, ?, ?) ON CONFLICT (kind) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at",
      kind,
      value,
      Date.now(),
    );
  }

  /** Whether there was a record of that kind to delete. */
  async deleteRecord(tenant: string, kind: string): Promise<boolean> {
    this.claim(tenant);
    await this.takeOver(tenant, kind);
    return this.sql.exec("DELETE FROM records WHERE kind = ? RETURNING kind", kind).toArray().length > 0;
  }

  /**
   * Takes over the tenant's row of this kind that a release before this one
   * kept in the control plane, before any verb of the kind is served: copied
   * here (with its marker, in one transaction), then deleted there, then the
   * marker says so, and the control plane is asked no more. One handover of a
   * kind runs at a time (the object has one instance): a call that comes
   * meanwhile waits for it, so the old row is copied once and never replaces
   * a record written since. A delete that failed is tried again at the next
   * touch; the row is copied before it is deleted, so nothing is lost between
   * the two objects.
   */
  private async takeOver(tenant: string, kind: string): Promise<void> {
    const handover = this.handover(kind);
    if (handover && handover.cleared_at !== null) return;
    let taking = this.takingOver.get(kind);
    if (!taking) {
      taking = this.handOver(tenant, kind).finally(() => this.takingOver.delete(kind));
      this.takingOver.set(kind, taking);
    }
    await taking;
  }

  private async handOver(tenant: string, kind: string): Promise<void> {
    const control = controlPlane(this.env);
    if (!this.handover(kind)) {
      const old = await control.get(kind, tenant);
      this.ctx.storage.transactionSync(() => {
        const now = Date.now();
        if (old !== null) this.sql.exec("INSERT INTO records (kind, value, updated_at) VALUES (?, ?, ?)", kind, JSON.stringify(old), now);
        this.sql.exec("INSERT INTO handovers (kind, copied_at) VALUES (?, ?)", kind, now);
      });
    }
    await control.delete(kind, tenant);
    this.sql.exec("UPDATE handovers SET cleared_at = ? WHERE kind = ?", Date.now(), kind);
  }

  private handover(kind: string): { cleared_at: number | null } | undefined {
    return this.sql.exec<{ cleared_at: number | null }>("SELECT cleared_at FROM handovers WHERE kind = ?", kind).toArray()[0];
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

// ---- a tenant's records, for the Worker (a bridge names the kind and parses the value) ----

/** The tenant's record of that kind, read from its own object each time (no copy is kept: a withdrawal counts at the next request), or null. */
export async function tenantRecord(env: Env, tenant: string, kind: string): Promise<unknown> {
  const value = await tenantStub(env, tenant).record(tenant, kind);
  return value === null ? null : (JSON.parse(value) as unknown);
}

export function putTenantRecord(env: Env, tenant: string, kind: string, value: unknown): Promise<void> {
  return tenantStub(env, tenant).putRecord(tenant, kind, JSON.stringify(value));
}

/** Whether there was one to delete. */
export function deleteTenantRecord(env: Env, tenant: string, kind: string): Promise<boolean> {
  return tenantStub(env, tenant).deleteRecord(tenant, kind);
}

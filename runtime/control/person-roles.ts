// A person's index of tenants: one Durable Object per identity, listing the
// tenants where the person was given a role, so the console finds them at
// sign-in without a table of every tenant's roles. It holds no role: each
// listed tenant's own object is asked at every request, so a role taken away
// is refused at the next one even when the index still lists its tenant. A
// tenant is listed before the role is given, and unlisted after it is taken
// away (docs/design.md, "Access"). Roles an older release kept in the control
// plane are read into the index at its first touch, once.
import { DurableObject } from "cloudflare:workers";
import { type Migration, runMigrations } from "../../lib/migrations.ts";
import { controlPlane } from "./control-plane.ts";
import { countedNamespace } from "../../lib/object-calls.ts";

/** Append-only (lib/migrations.ts). */
const MIGRATIONS: readonly Migration[] = [
  {
    // handover: when the tenants where the control plane kept a role for the person were listed.
    name: "tenants where a role was given, their handover",
    sql: `CREATE TABLE tenants (tenant TEXT PRIMARY KEY, listed_at INTEGER NOT NULL);
CREATE TABLE handover (taken_at INTEGER NOT NULL);`,
  },
];

export class PersonRoles extends DurableObject<Env> {
  private readonly sql: SqlStorage;

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    this.sql = ctx.storage.sql;
    runMigrations(ctx.storage, MIGRATIONS);
  }

  /** Lists a tenant (before the role is given there). */
  async list(identity: string, tenant: string): Promise<void> {
    await this.takeOver(identity);
    this.sql.exec("INSERT INTO tenants (tenant, listed_at) VALUES (?, ?) ON CONFLICT DO NOTHING", tenant, Date.now());
  }

  /** Unlists a tenant (after the role there was taken away). */
  async unlist(identity: string, tenant: string): Promise<void> {
    await this.takeOver(identity);
    this.sql.exec("DELETE FROM tenants WHERE tenant = ?", tenant);
  }

  async tenants(identity: string): Promise<string[]> {
    await this.takeOver(identity);
    return this.sql.exec<{ tenant: string }>("SELECT tenant FROM tenants ORDER BY tenant").toArray().map((r) => r.tenant);
  }

  /**
   * Lists the tenants where the control plane keeps a role for the person, as
   * a release before this one left it, once. Nothing is deleted there: each
   * tenant's object takes its own roles over, and lists each person it takes
   * over here first, so a role read into neither is never lost.
   */
  private async takeOver(identity: string): Promise<void> {
    if (this.taken()) return;
    await this.ctx.blockConcurrencyWhile(async () => {
      if (this.taken()) return;
      const held = await controlPlane(this.env).rolesHeldBy([identity]);
      this.ctx.storage.transactionSync(() => {
        for (const row of held) this.sql.exec("INSERT INTO tenants (tenant, listed_at) VALUES (?, ?) ON CONFLICT DO NOTHING", row.tenant, Date.now());
        this.sql.exec("INSERT INTO handover (taken_at) VALUES (?)", Date.now());
      });
    });
  }

  private taken(): boolean {
    return this.sql.exec("SELECT 1 FROM handover").toArray().length > 0;
  }
}

export function personRolesStub(env: Env, identity: string): DurableObjectStub<PersonRoles> {
  const namespace = countedNamespace(env, "PersonRoles", env.PERSON_ROLES as DurableObjectNamespace<PersonRoles>);
  return namespace.get(namespace.idFromName(identity));
}

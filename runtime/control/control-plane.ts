// The control plane: one Durable Object (named "control") holding the
// platform's own facts: the directory of tenants and agents (names, platform,
// dates). What is a tenant's is in its own object (tenant.ts): the records a
// bridge reads on a turn's way, the API keys, roles, the audit trail, bounds,
// people's names, settings and their version, the agents' descriptions. Rows
// an older release kept here for them are deleted once that object has taken
// them over (its read, then clear), and of an old key, which names no tenant,
// only its hash and tenant stay here (old_keys) to send it to its tenant's
// object.
import { DurableObject } from "cloudflare:workers";
import type { Route } from "../chat.ts";
import { type Migration, runMigrations } from "../../lib/migrations.ts";
import { AGENT_RECORDS_SCHEMA, agentListing, DIRECTORY_SCHEMA, dropDescriptions, markDeleted, oldAgentsOf, recordEntry, tenantListing, type AgentListing, type DirectoryEntry, type TenantListing } from "./directory.ts";
import { SETTING_KINDS } from "./settings.ts";
import type { OldSettings } from "./tenant-settings.ts";
import * as access from "./access-tables.ts";
import { clearPeopleOfTeam, PEOPLE_SCHEMA, peopleOfTeam } from "./people.ts";
import type { HandedAuditRow, PersonName, RoleRow } from "./tenant-access.ts";
import { countedNamespace } from "../../lib/object-calls.ts";

/**
 * Append-only (lib/migrations.ts, docs/design.md "Migrations"): a schema
 * change is a new entry. The first is the schema releases before versioning
 * created with IF NOT EXISTS on every wake, so a control plane they wrote is adopted.
 */
const MIGRATIONS: readonly Migration[] = [
  {
    name: "settings, directory",
    sql: `CREATE TABLE IF NOT EXISTS settings (namespace TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL, updated_at INTEGER NOT NULL, PRIMARY KEY (namespace, key));
${DIRECTORY_SCHEMA};`,
  },
  { name: "agent records", sql: AGENT_RECORDS_SCHEMA },
  { name: "api keys, roles, audit trail", sql: access.ACCESS_SCHEMA },
  { name: "people directory", sql: PEOPLE_SCHEMA },
  { name: "audit dedupe key", sql: access.AUDIT_DEDUPE_SCHEMA },
  { name: "index of old keys", sql: access.OLD_KEYS_SCHEMA },
  { name: "the trail moves to the tenants' objects", sql: access.AUDIT_MOVES },
  // Console sessions are each their own object now (console/session-object.ts); an older release's rows are dropped (people sign in again).
  { name: "old console sessions dropped", sql: "DELETE FROM settings WHERE namespace = 'console-sessions'" },
];

/** Where an older release kept each tenant's settings version: the settings table, under this namespace (read and cleared by the handover). */
const VERSIONS = "settings-version";

/** The settings rows of a tenant and its agents as an older release kept them: key `<tenant>` or `<tenant>/<agent>`, one namespace per kind. */
const OLD_SETTINGS_WHERE = `namespace IN (${Object.keys(SETTING_KINDS).map((kind) => `'${kind}'`).join(", ")}) AND (key = ?1 OR substr(key, 1, length(?1) + 1) = ?1 || '/')`;

export class ControlPlane extends DurableObject<Env> {
  private readonly sql: SqlStorage;

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    this.sql = ctx.storage.sql;
    runMigrations(ctx.storage, MIGRATIONS);
  }

  async get<T = unknown>(namespace: string, key: string): Promise<T | null> {
    return this.read<T>(namespace, key);
  }

  private read<T>(namespace: string, key: string): T | null {
    const row = this.sql.exec<{ value: string }>("SELECT value FROM settings WHERE namespace = ? AND key = ?", namespace, key).toArray()[0];
    return row ? (JSON.parse(row.value) as T) : null;
  }

  async delete(namespace: string, key: string): Promise<boolean> {
    return this.sql.exec("DELETE FROM settings WHERE namespace = ? AND key = ?", namespace, key).rowsWritten > 0;
  }

  // ---- the directory (runtime/control/directory.ts), written by each tenant's object ----

  async recordAgent(entry: DirectoryEntry): Promise<void> {
    recordEntry(this.sql, entry, Date.now());
  }

  async tenants(): Promise<TenantListing[]> {
    return tenantListing(this.sql);
  }

  async agents(tenant?: string): Promise<AgentListing[]> {
    return agentListing(this.sql, tenant);
  }

  /** Listed nowhere from now on. */
  async markAgentDeleted(route: Route): Promise<void> {
    markDeleted(this.sql, route, Date.now());
  }

  // ---- what an older release kept here of a tenant's, for the tenant's object to take over ----

  /** Whether any row of this tenant's an older release kept here is left: its settings and records, keys, roles, trail, people's names, agents' descriptions. */
  async holdsOlderRows(tenant: string): Promise<boolean> {
    const held = this.sql
      .exec<{ held: number }>(
        `SELECT EXISTS (SELECT 1 FROM settings WHERE key = ?1 OR substr(key, 1, length(?1) + 1) = ?1 || '/')
           OR EXISTS (SELECT 1 FROM api_keys WHERE tenant = ?1) OR EXISTS (SELECT 1 FROM roles WHERE tenant = ?1) OR EXISTS (SELECT 1 FROM audit WHERE tenant = ?1)
           OR EXISTS (SELECT 1 FROM directory WHERE tenant = ?1 AND description IS NOT NULL) AS held`,
        tenant,
      )
      .one().held;
    return held === 1 || peopleOfTeam(this.sql, tenant).length > 0;
  }

  /** A tenant's settings rows, version and agents (descriptions included) as an older release kept them. */
  async oldSettings(tenant: string): Promise<OldSettings> {
    const settings = this.sql
      .exec<{ namespace: string; key: string; value: string }>(`SELECT namespace, key, value FROM settings WHERE ${OLD_SETTINGS_WHERE}`, tenant)
      .toArray()
      .map((row) => ({ kind: row.namespace, agent: row.key === tenant ? null : row.key.slice(tenant.length + 1), value: row.value }));
    return { settings, version: this.read<number>(VERSIONS, tenant), agents: oldAgentsOf(this.sql, tenant) };
  }

  /** Once the tenant's object holds them: its settings rows and version deleted here, its descriptions dropped from the directory, in one transaction. */
  async clearOldSettings(tenant: string): Promise<void> {
    this.ctx.storage.transactionSync(() => {
      this.sql.exec(`DELETE FROM settings WHERE ${OLD_SETTINGS_WHERE}`, tenant);
      this.sql.exec("DELETE FROM settings WHERE namespace = ? AND key = ?", VERSIONS, tenant);
      dropDescriptions(this.sql, tenant);
    });
  }

  // ---- what the tenants' objects take over: keys, roles, the trail, people's names (access-tables.ts, people.ts; the policy is runtime/access's) ----

  // Keys live in each tenant's object (tenant.ts). A key an older release
  // made names no tenant: its hash names it here, in api_keys until the
  // tenant's object took the rows over, then in old_keys.

  /** The tenant of a live key an older release made, or null. */
  async oldKeyTenant(hash: string): Promise<string | null> {
    return access.oldKeyTenant(this.sql, hash);
  }

  /** A tenant's key rows as an older release kept them, with their hashes: the tenant's object copies them. */
  async oldKeys(tenant: string): Promise<(access.KeyRow & { hash: string })[]> {
    return access.oldKeysOf(this.sql, tenant);
  }

  /** Once the tenant's object holds them: its key rows deleted here, the live ones' hashes kept in the index, in one transaction. */
  async clearOldKeys(tenant: string): Promise<void> {
    this.ctx.storage.transactionSync(() => access.clearOldKeys(this.sql, tenant));
  }

  /** A revoked old key need not be found any more. */
  async forgetOldKey(hash: string): Promise<void> {
    this.sql.exec("DELETE FROM old_keys WHERE hash = ?", hash);
  }

  // Roles, the trail and people's names live in each tenant's object
  // (tenant-access.ts); what an older release kept here is read once by the
  // tenant's object (and the roles by each person's index of tenants), then cleared.

  async oldRoles(tenant: string): Promise<RoleRow[]> {
    return access.rolesOf(this.sql, tenant);
  }

  /** The roles an older release kept here for a person's identities, in every tenant not yet handed over. */
  async rolesHeldBy(identities: string[]): Promise<RoleRow[]> {
    return access.rolesHeldBy(this.sql, identities);
  }

  async clearOldRoles(tenant: string): Promise<void> {
    access.clearRoles(this.sql, tenant);
  }

  async oldAudit(tenant: string): Promise<HandedAuditRow[]> {
    return access.oldAuditOf(this.sql, tenant);
  }

  async clearOldAudit(tenant: string): Promise<void> {
    access.clearAudit(this.sql, tenant);
  }

  /** The names kept here of the people whose identity names this team or guild (its tenant's object keeps them now). */
  async oldPeople(team: string): Promise<(PersonName & { updatedAt: number })[]> {
    return peopleOfTeam(this.sql, team);
  }

  async clearOldPeople(team: string): Promise<void> {
    clearPeopleOfTeam(this.sql, team);
  }
}

export function controlPlane(env: Env): DurableObjectStub<ControlPlane> {
  const namespace = countedNamespace(env, "ControlPlane", env.CONTROL as DurableObjectNamespace<ControlPlane>);
  return namespace.get(namespace.idFromName("control"));
}

// ---- the directory, for callers outside the control plane ----

export function listTenants(env: Env): Promise<TenantListing[]> {
  return controlPlane(env).tenants();
}

export function listAgents(env: Env, tenant?: string): Promise<AgentListing[]> {
  return controlPlane(env).agents(tenant);
}

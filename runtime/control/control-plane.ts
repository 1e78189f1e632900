// The control plane: one Durable Object (named "control") holding what is not
// one agent's: the directory of tenants and agents, per-tenant and per-agent
// settings, console sessions. The records a bridge reads on a turn's way, the
// API keys, roles, the audit trail, a tenant's bounds and people's names are
// in each tenant's own object (tenant.ts); rows an older release kept here for
// them are deleted once that object has taken them over (its read, then
// clear), and of an old key, which names no tenant, only its hash and tenant
// stay here (old_keys) to send it to its tenant's object. Values are JSON;
// anything secret is encrypted by its owner before it is stored here.
import { DurableObject } from "cloudflare:workers";
import type { Route } from "../chat.ts";
import { type Migration, runMigrations } from "../../lib/migrations.ts";
import {
  AGENT_RECORDS_SCHEMA,
  agentListing,
  agentRecord,
  createEntry,
  describeEntry,
  DIRECTORY_SCHEMA,
  markDeleted,
  recordEntry,
  tenantListing,
  type AgentListing,
  type AgentRecord,
  type DirectoryEntry,
  type TenantListing,
} from "./directory.ts";
import { settingKey, type SettingKind, type SettingsText } from "./settings.ts";
import * as access from "./access-tables.ts";
import { clearPeopleOfTeam, PEOPLE_SCHEMA, peopleOfTeam } from "./people.ts";
import type { AuditEntry, HandedAuditRow, PersonName, RoleRow } from "./tenant-access.ts";
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
];

/** Who changed a setting and what the trail keeps of it (the value before is the control plane's to read). */
export type SettingAudit = Pick<AuditEntry, "actor" | "action" | "subject" | "after">;

/** Each tenant's settings version, in the settings table under this namespace. */
const VERSIONS = "settings-version";

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

  async put(namespace: string, key: string, value: unknown): Promise<void> {
    this.write(namespace, key, value);
  }

  private write(namespace: string, key: string, value: unknown): void {
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

  // ---- per-tenant and per-agent settings (runtime/control/settings.ts) ----

  /** An agent's first event: it is listed in the directory, and takes its copy of the settings, in one step. */
  async register(entry: DirectoryEntry): Promise<SettingsText> {
    recordEntry(this.sql, entry, Date.now());
    return this.settingsOf(entry);
  }

  async settingsFor(route: Route): Promise<SettingsText> {
    return this.settingsOf(route);
  }

  /**
   * Sets (or with null, removes) a tenant's or an agent's setting and returns
   * what each affected agent listed in the directory must now hold; the caller
   * pushes it. Registration and change happen one at a time here, so an agent
   * registering meanwhile either is a target or reads the new value. The
   * value before (JSON), read in the same transaction, goes back for the
   * trail (kept in the tenant's object, appended by the caller).
   */
  async changeSetting(kind: SettingKind, route: Route, scope: "tenant" | "agent", value: unknown): Promise<{ before: string | null; targets: { route: Route; settings: SettingsText }[] }> {
    const key = settingKey(route, scope);
    return this.ctx.storage.transactionSync(() => {
      const before = this.read(kind, key);
      if (value === null) this.sql.exec("DELETE FROM settings WHERE namespace = ? AND key = ?", kind, key);
      else this.write(kind, key, value);
      this.write(VERSIONS, route.tenant, (this.read<number>(VERSIONS, route.tenant) ?? 0) + 1);
      const agents = agentListing(this.sql, route.tenant).filter((a) => scope === "tenant" || a.agent === route.agent);
      return { before: before === null ? null : JSON.stringify(before), targets: agents.map((a) => ({ route: { tenant: a.tenant, agent: a.agent }, settings: this.settingsOf(a) })) };
    });
  }

  private settingsOf(route: Route): SettingsText {
    return JSON.stringify({
      version: this.read<number>(VERSIONS, route.tenant) ?? 0,
      mounts: { tenant: this.read("mounts", settingKey(route, "tenant")), agent: this.read("mounts", settingKey(route, "agent")) },
      models: { tenant: this.read("models", settingKey(route, "tenant")), agent: this.read("models", settingKey(route, "agent")) },
      secondMessage: { tenant: this.read("secondMessage", settingKey(route, "tenant")), agent: this.read("secondMessage", settingKey(route, "agent")) },
    });
  }

  // ---- the directory (runtime/control/directory.ts) ----

  async recordAgent(entry: DirectoryEntry): Promise<void> {
    recordEntry(this.sql, entry, Date.now());
  }

  async tenants(): Promise<TenantListing[]> {
    return tenantListing(this.sql);
  }

  async agents(tenant?: string): Promise<AgentListing[]> {
    return agentListing(this.sql, tenant);
  }

  // ---- agents made, changed and deleted through the Agents API ----

  async createAgent(entry: Route & { description: string | null }): Promise<boolean> {
    return createEntry(this.sql, entry, Date.now());
  }

  async agent(route: Route): Promise<AgentRecord | null> {
    return agentRecord(this.sql, route);
  }

  async describeAgent(route: Route, description: string | null): Promise<boolean> {
    return describeEntry(this.sql, route, description);
  }

  /** Listed nowhere from now on; its settings are no longer pushed. */
  async markAgentDeleted(route: Route): Promise<void> {
    markDeleted(this.sql, route, Date.now());
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

export function recordAgent(env: Env, entry: DirectoryEntry): Promise<void> {
  return controlPlane(env).recordAgent(entry);
}

export function listTenants(env: Env): Promise<TenantListing[]> {
  return controlPlane(env).tenants();
}

export function listAgents(env: Env, tenant?: string): Promise<AgentListing[]> {
  return controlPlane(env).agents(tenant);
}

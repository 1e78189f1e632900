// The control plane: one Durable Object (named "control") holding what is not
// one agent's: the directory of tenants and agents, per-tenant and per-agent
// settings, roles and the audit trail, a tenant's bounds, people's names,
// console sessions. The records a bridge reads on a turn's way and the API
// keys are in each tenant's own object (tenant.ts); rows an older release kept
// here for them are deleted once that object has taken them over (its get,
// then delete), and of an old key, which names no tenant, only its hash and
// tenant stay here (old_keys) to send it to its tenant's object. Values are JSON; anything secret is encrypted by its owner before
// it is stored here.
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
import { namesOf, PEOPLE_SCHEMA, rememberNames, type PersonName } from "./people.ts";
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
];

/** Who changed a setting and what the trail keeps of it (the value before is the control plane's to read). */
export type SettingAudit = Pick<access.AuditEntry, "actor" | "action" | "subject" | "after">;

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

  /** Writes (or with null, removes) a value and its audit row, the value before in it, in one transaction; returns the value before as JSON. */
  async putAudited(namespace: string, key: string, value: unknown, audit: Omit<access.AuditEntry, "before">): Promise<string | null> {
    return this.ctx.storage.transactionSync(() => {
      const before = this.read(namespace, key);
      if (value === null) this.sql.exec("DELETE FROM settings WHERE namespace = ? AND key = ?", namespace, key);
      else this.write(namespace, key, value);
      access.appendAudit(this.sql, { ...audit, before }, Date.now());
      return before === null ? null : JSON.stringify(before);
    });
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
   * registering meanwhile either is a target or reads the new value. With
   * `audit`, the change and its row (the value before read here) are one
   * transaction: neither stands without the other.
   */
  async changeSetting(kind: SettingKind, route: Route, scope: "tenant" | "agent", value: unknown, audit?: SettingAudit): Promise<{ route: Route; settings: SettingsText }[]> {
    const key = settingKey(route, scope);
    return this.ctx.storage.transactionSync(() => {
      const before = this.read(kind, key);
      if (value === null) this.sql.exec("DELETE FROM settings WHERE namespace = ? AND key = ?", kind, key);
      else this.write(kind, key, value);
      this.write(VERSIONS, route.tenant, (this.read<number>(VERSIONS, route.tenant) ?? 0) + 1);
      if (audit) access.appendAudit(this.sql, { tenant: route.tenant, ...audit, before }, Date.now());
      const agents = agentListing(this.sql, route.tenant).filter((a) => scope === "tenant" || a.agent === route.agent);
      return agents.map((a) => ({ route: { tenant: a.tenant, agent: a.agent }, settings: this.settingsOf(a) }));
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

  // ---- keys, roles and the audit trail (runtime/control/access-tables.ts; the policy is runtime/access's) ----

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

  async roles(tenant: string): Promise<access.RoleRow[]> {
    return access.rolesOf(this.sql, tenant);
  }

  /** The roles of a person's identities (Discord: one per guild), asked at once. */
  async rolesHeldBy(identities: string[]): Promise<access.RoleRow[]> {
    return access.rolesHeldBy(this.sql, identities);
  }

  /** Sets or removes a role and records it in the trail, in one transaction. */
  async setRole(tenant: string, identity: string, role: string | null, actor: string): Promise<{ before: string | null }> {
    return this.ctx.storage.transactionSync(() => {
      const before = access.setRole(this.sql, tenant, identity, role, actor, Date.now());
      if (before !== role) access.appendAudit(this.sql, { tenant, actor, action: role === null ? "role.remove" : "role.set", subject: identity, before, after: role }, Date.now());
      return { before };
    });
  }

  async appendAudit(entry: access.AuditEntry): Promise<void> {
    access.appendAudit(this.sql, entry, Date.now());
  }

  async audit(tenant: string, limit: number, beforeSeq?: number): Promise<access.AuditRow[]> {
    return access.auditOf(this.sql, tenant, limit, beforeSeq);
  }

  // ---- the people directory (runtime/control/people.ts) ----

  async rememberNames(people: PersonName[]): Promise<void> {
    rememberNames(this.sql, people, Date.now());
  }

  async namesOf(identities: string[]): Promise<Record<string, string>> {
    return namesOf(this.sql, identities);
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

// ---- the people directory, for callers outside the control plane ----

/** What this isolate last told the directory, so a busy chat does not call the control plane on every message. */
const told = new Map<string, string>();
const TOLD_KEPT = 10_000;

/** Keeps a person's name in the directory (a call only when this isolate has not told it that name). */
export async function rememberPerson(env: Env, person: PersonName): Promise<void> {
  if (told.get(person.identity) === person.name) return;
  await controlPlane(env).rememberNames([person]);
  if (told.size >= TOLD_KEPT) told.clear();
  told.set(person.identity, person.name);
}

export function peopleNames(env: Env, identities: string[]): Promise<Record<string, string>> {
  return identities.length === 0 ? Promise.resolve({}) : controlPlane(env).namesOf([...new Set(identities)]);
}

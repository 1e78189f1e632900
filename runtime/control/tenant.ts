// The tenant's own object: one Durable Object per tenant, its own SQLite, for
// what is the tenant's alone (its secrets, sealed by the Worker; the records a
// bridge reads on a turn's way, its bounds among them; its API keys; roles,
// the audit trail, its people's names; its settings and its agents), so no
// deployment-wide object holds it or stands on a turn's way. What an older
// release kept in the control plane is taken over at the first touch, once
// (takeOver; docs/design.md, "Access").
import { DurableObject } from "cloudflare:workers";
import { type Migration, runMigrations } from "../../lib/migrations.ts";
import type { Sealed } from "../../lib/sealed.ts";
import type { KeyRow } from "./access-tables.ts";
import type { Route } from "../chat.ts";
import { controlPlane } from "./control-plane.ts";
import type { DirectoryEntry } from "./directory.ts";
import type { SettingKind, SettingsText } from "./settings.ts";
import { copyKey, insertKey, keysOf, revokeKey, TENANT_KEYS_SCHEMA, type TenantKey, useKey } from "./tenant-keys.ts";
import { personRolesStub } from "./person-roles.ts";
import * as access from "./tenant-access.ts";
import type { AuditEntry, AuditRow, PersonName, RoleRow } from "./tenant-access.ts";
import * as tenantSettings from "./tenant-settings.ts";
import { countedNamespace } from "../../lib/object-calls.ts";

/** Append-only (lib/migrations.ts). */
const MIGRATIONS: readonly Migration[] = [
  {
    name: "identity, sealed secrets",
    sql: `CREATE TABLE identity (tenant TEXT NOT NULL);
CREATE TABLE secrets (name TEXT PRIMARY KEY, iv TEXT NOT NULL, sealed TEXT NOT NULL, created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL, updated_by TEXT NOT NULL);`,
  },
  {
    // handovers: what was copied here from the control plane (copied_at) and then deleted there (cleared_at): a record's kind, or the API keys (KEYS).
    name: "records, their handover from the control plane",
    sql: `CREATE TABLE records (kind TEXT PRIMARY KEY, value TEXT NOT NULL, updated_at INTEGER NOT NULL);
CREATE TABLE handovers (kind TEXT PRIMARY KEY, copied_at INTEGER NOT NULL, cleared_at INTEGER);`,
  },
  { name: "api keys", sql: TENANT_KEYS_SCHEMA },
  { name: "roles, audit trail, people's names", sql: access.TENANT_ACCESS_SCHEMA },
  { name: "settings, agents", sql: tenantSettings.TENANT_SETTINGS_SCHEMA },
];

/** The handover of the API keys, beside the records' (a bridge's kinds name their platform, never this). */
const KEYS = "api keys";
/** The handovers of roles, the trail and people's names (tenant-access.ts), beside the keys'. */
const ROLES = "roles";
const AUDIT = "audit trail";
const PEOPLE = "people";
/** The handover of the settings, their version and the agents with their descriptions. */
const SETTINGS = "settings and agents";
/** The marker of a tenant of whom the control plane held nothing when first asked (a tenant made on this release): no handover asks it again. */
const NOTHING_OLDER = "nothing older";

/** Who changed a setting and what the trail keeps of it (the value before is read in the change's transaction). */
export type SettingAudit = Pick<AuditEntry, "actor" | "action" | "subject" | "after">;

/** A secret as anyone may see it: its name and dates, never its value. */
export interface SecretListing {
  name: string;
  createdAt: number;
  updatedAt: number;
  updatedBy: string;
}


export class Tenant extends DurableObject<Env> {
  private readonly sql: SqlStorage;
  /** Each handover under way, by its name in `handovers`: a call that comes meanwhile waits for it. */
  private readonly takingOver = new Map<string, Promise<void>>();
  /** The control plane's answer to "do you hold anything of this tenant's", asked once a wake until it says no (which is kept). */
  private olderRows: Promise<boolean> | undefined;

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    this.sql = ctx.storage.sql;
    runMigrations(ctx.storage, MIGRATIONS);
  }

  /** The object serves the tenant it first served, and refuses any other (invariant 4). */
  private claim(tenant: string): void {
    const owner = this.owner();
    if (owner === null) this.sql.exec("INSERT INTO identity (tenant) VALUES (?)", tenant);
    else if (owner !== tenant) throw new Error(`this object is tenant ${owner}'s, not ${tenant}'s`);
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
    await this.takeOverRecord(tenant, kind);
    return this.sql.exec<{ value: string }>("SELECT value FROM records WHERE kind = ?", kind).toArray()[0]?.value ?? null;
  }

  /** Sets (or replaces) the record of that kind; `value` is JSON. */
  async putRecord(tenant: string, kind: string, value: string): Promise<void> {
    this.claim(tenant);
    await this.takeOverRecord(tenant, kind);
    this.keepRecord(kind, value);
  }

  private keepRecord(kind: string, value: string): void {
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
    await this.takeOverRecord(tenant, kind);
    return this.sql.exec("DELETE FROM records WHERE kind = ? RETURNING kind", kind).toArray().length > 0;
  }

  /** Takes over the tenant's row of this kind that a release before this one kept in the control plane's settings (takeOver). */
  private takeOverRecord(tenant: string, kind: string): Promise<void> {
    const control = controlPlane(this.env);
    return this.takeOver(kind, {
      read: () => control.get(kind, tenant),
      keep: (old) => {
        if (old !== null) this.sql.exec("INSERT INTO records (kind, value, updated_at) VALUES (?, ?, ?)", kind, JSON.stringify(old), Date.now());
      },
      clear: () => control.delete(kind, tenant),
    });
  }

  /**
   * Takes over what a release before this one kept for the tenant in the
   * control plane, before anything of it is served: read there, copied here
   * with its marker in one transaction, then deleted there, then the marker
   * says so, and the control plane is asked no more. One handover of a name
   * runs at a time (the object has one instance): a call that comes meanwhile
   * waits for it, so the old rows are copied once and never replace one
   * written since. A delete that failed is tried again at the next touch;
   * rows are copied before they are deleted, so nothing is lost between the
   * two objects. A tenant of whom the control plane holds nothing (one made
   * on this release) is told so once, and no handover asks it again.
   */
  private async takeOver<T>(name: string, old: { read: () => Promise<T>; keep: (rows: T) => void; clear: () => Promise<unknown> }): Promise<void> {
    const marker = () => this.sql.exec<{ cleared_at: number | null }>("SELECT cleared_at FROM handovers WHERE kind = ?", name).toArray()[0];
    if (marker()?.cleared_at != null) return;
    if (!marker() && !(await this.mayHoldOlder())) return;
    let taking = this.takingOver.get(name);
    if (!taking) {
      taking = (async () => {
        if (!marker()) {
          const rows = await old.read();
          this.ctx.storage.transactionSync(() => {
            old.keep(rows);
            this.sql.exec("INSERT INTO handovers (kind, copied_at) VALUES (?, ?)", name, Date.now());
          });
        }
        await old.clear();
        this.sql.exec("UPDATE handovers SET cleared_at = ? WHERE kind = ?", Date.now(), name);
      })().finally(() => this.takingOver.delete(name));
      this.takingOver.set(name, taking);
    }
    await taking;
  }

  /** Whether the control plane may still hold rows of this tenant that an older release kept there. */
  private mayHoldOlder(): Promise<boolean> {
    const told = this.sql.exec("SELECT 1 FROM handovers WHERE kind = ? AND cleared_at IS NOT NULL", NOTHING_OLDER).toArray().length > 0;
    if (told) return Promise.resolve(false);
    this.olderRows ??= controlPlane(this.env)
      .holdsOlderRows(this.owner()!)
      .then(
        (holds) => {
          const now = Date.now();
          if (!holds) this.sql.exec("INSERT OR IGNORE INTO handovers (kind, copied_at, cleared_at) VALUES (?, ?, ?)", NOTHING_OLDER, now, now);
          return holds;
        },
        (err: unknown) => {
          this.olderRows = undefined;
          throw err;
        },
      );
    return this.olderRows;
  }

  // ---- API keys (tenant-keys.ts) ----

  /** Null, and nothing written, when a key with its id exists already. */
  async createKey(tenant: string, key: TenantKey): Promise<KeyRow | null> {
    this.claim(tenant);
    await this.takeOverKeys(tenant);
    return insertKey(this.sql, tenant, key, Date.now());
  }

  async keys(tenant: string): Promise<KeyRow[]> {
    this.claim(tenant);
    await this.takeOverKeys(tenant);
    return keysOf(this.sql, tenant);
  }

  /**
   * The live key with this hash, its last use recorded; null for an unknown
   * or revoked key. `named`: the key names this tenant (one made by this
   * release, kept only here), so nothing is claimed or taken over for it: a
   * key naming a tenant that has none finds nothing and writes nothing.
   */
  async useKey(tenant: string, hash: string, named: boolean): Promise<KeyRow | null> {
    if (named) {
      if (this.owner() !== tenant) return null;
    } else {
      this.claim(tenant);
      await this.takeOverKeys(tenant);
    }
    return useKey(this.sql, tenant, hash, Date.now());
  }

  /** Revokes a live key (refused from the next request on); null when there is no such live key. */
  async revokeKey(tenant: string, id: string): Promise<KeyRow | null> {
    this.claim(tenant);
    await this.takeOverKeys(tenant);
    const revoked = revokeKey(this.sql, tenant, id, Date.now());
    if (!revoked) return null;
    if (revoked.oldHash !== null) {
      // The control plane's index need no longer name the tenant of a key that is refused here anyway.
      await controlPlane(this.env)
        .forgetOldKey(revoked.oldHash)
        .catch((err: unknown) => console.error("tenant: the control plane's index still names a revoked key", err));
    }
    return revoked.row;
  }

  /** Takes over the tenant's key rows a release before this one kept in the control plane (takeOver); their hashes stay in its index of old keys, which names no other data. */
  private takeOverKeys(tenant: string): Promise<void> {
    const control = controlPlane(this.env);
    return this.takeOver(KEYS, {
      read: () => control.oldKeys(tenant),
      keep: (old) => old.forEach((key) => copyKey(this.sql, key)),
      clear: () => control.clearOldKeys(tenant),
    });
  }

  // ---- roles, the audit trail, a record changed with its row, people's names (tenant-access.ts) ----

  async roles(tenant: string): Promise<RoleRow[]> {
    this.claim(tenant);
    await this.takeOverRoles(tenant);
    return access.rolesIn(this.sql, tenant);
  }

  /** The person's role here, or null: read at each request a person makes in the console. */
  async roleOf(tenant: string, identity: string): Promise<RoleRow | null> {
    this.claim(tenant);
    await this.takeOverRoles(tenant);
    return access.roleOf(this.sql, tenant, identity);
  }

  /** Sets or removes a role and appends it to the trail, in one transaction; returns the role held before. */
  async setRole(tenant: string, identity: string, role: string | null, actor: string): Promise<{ before: string | null }> {
    this.claim(tenant);
    await this.takeOverRoles(tenant);
    await this.takeOverAudit(tenant);
    return this.ctx.storage.transactionSync(() => {
      const before = access.setRole(this.sql, identity, role, actor, Date.now());
      if (before !== role) access.appendAudit(this.sql, { actor, action: role === null ? "role.remove" : "role.set", subject: identity, before, after: role }, Date.now());
      return { before };
    });
  }

  /** Appends a change to the trail; one appended before under the same key is not appended again. */
  async appendAudit(tenant: string, entry: AuditEntry): Promise<void> {
    this.claim(tenant);
    await this.takeOverAudit(tenant);
    access.appendAudit(this.sql, entry, Date.now());
  }

  async audit(tenant: string, limit: number, beforeSeq?: number): Promise<AuditRow[]> {
    this.claim(tenant);
    await this.takeOverAudit(tenant);
    return access.auditPage(this.sql, tenant, limit, beforeSeq);
  }

  /** Sets (or with null, removes) the record of that kind (`value` is JSON) and appends its row, the value before in it, in one transaction; returns the value before as JSON. */
  async putAuditedRecord(tenant: string, kind: string, value: string | null, audit: Omit<AuditEntry, "tenant" | "before">): Promise<string | null> {
    this.claim(tenant);
    await this.takeOverRecord(tenant, kind);
    await this.takeOverAudit(tenant);
    return this.ctx.storage.transactionSync(() => {
      const before = this.sql.exec<{ value: string }>("SELECT value FROM records WHERE kind = ?", kind).toArray()[0]?.value ?? null;
      if (value === null) this.sql.exec("DELETE FROM records WHERE kind = ?", kind);
      else this.keepRecord(kind, value);
      access.appendAudit(this.sql, { ...audit, before: before === null ? null : (JSON.parse(before) as unknown) }, Date.now());
      return before;
    });
  }

  /** Keeps the names of people whose identity names this tenant's team or guild. */
  async rememberNames(tenant: string, people: PersonName[]): Promise<void> {
    this.claim(tenant);
    await this.takeOverPeople(tenant);
    access.rememberNames(this.sql, people, Date.now());
  }

  async namesOf(tenant: string, identities: string[]): Promise<Record<string, string>> {
    this.claim(tenant);
    await this.takeOverPeople(tenant);
    return access.namesOf(this.sql, identities);
  }

  /**
   * Takes over the tenant's roles a release before this one kept in the
   * control plane (takeOver). Before they are deleted there, each person
   * holding one here has this tenant listed in their index of tenants
   * (person-roles.ts), which otherwise would read them there: a role is
   * never found in neither place.
   */
  private takeOverRoles(tenant: string): Promise<void> {
    const control = controlPlane(this.env);
    return this.takeOver(ROLES, {
      read: () => control.oldRoles(tenant),
      keep: (old) => old.forEach((row) => access.copyRole(this.sql, row)),
      clear: async () => {
        await Promise.all(access.rolesIn(this.sql, tenant).map((row) => personRolesStub(this.env, row.identity).list(row.identity, tenant)));
        await control.clearOldRoles(tenant);
      },
    });
  }

  /** Takes over the tenant's trail as the control plane kept it (takeOver): each row with its seq and dedupe key. */
  private takeOverAudit(tenant: string): Promise<void> {
    const control = controlPlane(this.env);
    return this.takeOver(AUDIT, {
      read: () => control.oldAudit(tenant),
      keep: (old) => old.forEach((row) => access.copyAudit(this.sql, row)),
      clear: () => control.clearOldAudit(tenant),
    });
  }

  /** Takes over the names the control plane kept of the people whose identity names this tenant's team or guild (takeOver). */
  private takeOverPeople(tenant: string): Promise<void> {
    const control = controlPlane(this.env);
    return this.takeOver(PEOPLE, {
      read: () => control.oldPeople(tenant),
      keep: (old) => access.copyNames(this.sql, old),
      clear: () => control.clearOldPeople(tenant),
    });
  }

  // ---- settings and agents (tenant-settings.ts; settings.ts says what an agent does with its copy) ----

  /**
   * An agent's first event: the object records the agent (telling the
   * directory, the only time a turn's way reaches it) and gives it its
   * settings copy. Registration and change happen one at a time here: the
   * agent is recorded and its copy read in one synchronous step, so a change
   * either came before (the copy has it) or pushes to it.
   */
  async register(tenant: string, entry: DirectoryEntry): Promise<SettingsText> {
    this.claim(tenant);
    await this.takeOverSettings(tenant);
    if (!tenantSettings.tenantAgent(this.sql, entry.agent)) await controlPlane(this.env).recordAgent(entry);
    tenantSettings.insertAgent(this.sql, { agent: entry.agent, platform: entry.platform ?? null, description: null, firstSeen: Date.now() });
    return tenantSettings.settingsText(this.sql, entry.agent);
  }

  /** An agent a bridge knows before its first event (a Slack install, with the workspace's name): recorded here, and the directory told. */
  async recordAgent(tenant: string, entry: DirectoryEntry): Promise<void> {
    this.claim(tenant);
    await this.takeOverSettings(tenant);
    await controlPlane(this.env).recordAgent(entry);
    tenantSettings.insertAgent(this.sql, { agent: entry.agent, platform: entry.platform ?? null, description: null, firstSeen: Date.now() });
  }

  /** An agent made through the Agents API: null when made, else the agent (live or deleted) that holds the name. */
  async createAgent(tenant: string, agent: string, description: string | null): Promise<tenantSettings.TenantAgent | null> {
    this.claim(tenant);
    await this.takeOverSettings(tenant);
    const holder = tenantSettings.tenantAgent(this.sql, agent);
    if (holder) return holder;
    await controlPlane(this.env).recordAgent({ tenant, agent, platform: "api" });
    if (tenantSettings.insertAgent(this.sql, { agent, platform: "api", description, firstSeen: Date.now() })) return null;
    return tenantSettings.tenantAgent(this.sql, agent);
  }

  /** The agent, live or deleted, or null. */
  async agent(tenant: string, agent: string): Promise<tenantSettings.TenantAgent | null> {
    this.claim(tenant);
    await this.takeOverSettings(tenant);
    return tenantSettings.tenantAgent(this.sql, agent);
  }

  async agents(tenant: string): Promise<tenantSettings.TenantAgent[]> {
    this.claim(tenant);
    await this.takeOverSettings(tenant);
    return tenantSettings.liveAgents(this.sql);
  }

  /** False when there is no such live agent. */
  async describeAgent(tenant: string, agent: string, description: string | null): Promise<boolean> {
    this.claim(tenant);
    await this.takeOverSettings(tenant);
    return tenantSettings.describeAgent(this.sql, agent, description);
  }

  /** Listed nowhere from now on (the directory first, so a request repeated after a failure finds the agent still live here); its settings are no longer pushed. */
  async deleteAgent(tenant: string, agent: string): Promise<void> {
    this.claim(tenant);
    await this.takeOverSettings(tenant);
    await controlPlane(this.env).markAgentDeleted({ tenant, agent });
    tenantSettings.markAgentDeleted(this.sql, agent, Date.now());
  }

  async settings(tenant: string, agent: string): Promise<SettingsText> {
    this.claim(tenant);
    await this.takeOverSettings(tenant);
    return tenantSettings.settingsText(this.sql, agent);
  }

  /**
   * Sets (or with null, removes) the tenant's (`agent` null) or an agent's
   * setting and returns what each affected live agent must now hold; the
   * caller pushes it. With `audit`, its trail row (the value before in it) is
   * written in the same transaction: neither stands without the other.
   */
  async changeSetting(tenant: string, kind: SettingKind, agent: string | null, value: unknown, audit?: SettingAudit): Promise<{ route: Route; settings: SettingsText }[]> {
    this.claim(tenant);
    await this.takeOverSettings(tenant);
    if (audit) await this.takeOverAudit(tenant);
    return this.ctx.storage.transactionSync(() => {
      const before = tenantSettings.putSetting(this.sql, kind, agent, value, Date.now());
      if (audit) access.appendAudit(this.sql, { ...audit, before: before === null ? null : (JSON.parse(before) as unknown) }, Date.now());
      return this.pushTargets(tenant, agent);
    });
  }

  /** The live agents a change of the tenant's (`agent` null) or an agent's setting reaches, each with what it must now hold. */
  private pushTargets(tenant: string, agent: string | null): { route: Route; settings: SettingsText }[] {
    const affected = tenantSettings.liveAgents(this.sql).filter((a) => agent === null || a.agent === agent);
    return affected.map((a) => ({ route: { tenant, agent: a.agent }, settings: tenantSettings.settingsText(this.sql, a.agent) }));
  }

  /** The tenant's stored settings of these kinds, each with its agent (null: the tenant's own), its value as JSON. */
  async storedSettings(tenant: string, kinds: SettingKind[]): Promise<{ kind: SettingKind; agent: string | null; value: string }[]> {
    this.claim(tenant);
    await this.takeOverSettings(tenant);
    return tenantSettings.storedSettings(this.sql, kinds);
  }

  /** Takes over the tenant's settings, version and agents (their descriptions) a release before this one kept in the control plane (takeOver); the directory keeps the agents' names. */
  private takeOverSettings(tenant: string): Promise<void> {
    const control = controlPlane(this.env);
    return this.takeOver(SETTINGS, {
      read: () => control.oldSettings(tenant),
      keep: (old) => tenantSettings.keepOldSettings(this.sql, old),
      clear: () => control.clearOldSettings(tenant),
    });
  }

  /** The tenant this object serves, or null before its first claim. */
  private owner(): string | null {
    return this.sql.exec<{ tenant: string }>("SELECT tenant FROM identity").toArray()[0]?.tenant ?? null;
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
  const namespace = countedNamespace(env, "Tenant", env.TENANT as DurableObjectNamespace<Tenant>);
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

// ---- a tenant's settings and agents, for the Worker ----

/** An agent's first event: recorded in its tenant's object, which answers with its settings copy. */
export function registerAgent(env: Env, entry: DirectoryEntry): Promise<SettingsText> {
  return tenantStub(env, entry.tenant).register(entry.tenant, entry);
}

/** An agent a bridge knows before its first event (a Slack install): its tenant's object records it and tells the directory. */
export function recordAgent(env: Env, entry: DirectoryEntry): Promise<void> {
  return tenantStub(env, entry.tenant).recordAgent(entry.tenant, entry);
}

/** The agent's settings as it holds them (read from its tenant's object). */
export function agentSettings(env: Env, route: Route): Promise<SettingsText> {
  return tenantStub(env, route.tenant).settings(route.tenant, route.agent);
}

// ---- a tenant's keys, for the Worker (the policy is runtime/access's) ----

export function tenantKeys(env: Env, tenant: string): Promise<KeyRow[]> {
  return tenantStub(env, tenant).keys(tenant);
}

/** Null when a key with its id exists already. */
export function keepTenantKey(env: Env, tenant: string, key: TenantKey): Promise<KeyRow | null> {
  return tenantStub(env, tenant).createKey(tenant, key);
}

/** The live key of the tenant with this hash, checked in the tenant's object each time (a revocation counts at the next request); `named`: the key itself names the tenant. */
export function useTenantKey(env: Env, tenant: string, hash: string, named: boolean): Promise<KeyRow | null> {
  return tenantStub(env, tenant).useKey(tenant, hash, named);
}

export function revokeTenantKeyRow(env: Env, tenant: string, id: string): Promise<KeyRow | null> {
  return tenantStub(env, tenant).revokeKey(tenant, id);
}

// ---- a tenant's roles, trail, bounds and people's names, for the Worker (the policy is runtime/access's) ----

export function tenantRoles(env: Env, tenant: string): Promise<RoleRow[]> {
  return tenantStub(env, tenant).roles(tenant);
}

/**
 * Gives (or with null, takes away) a person's role in a tenant, with its
 * trail row. The person's index of tenants lists the tenant before the role
 * is given and unlists it after it is taken away: a role is always found
 * from the index, and a tenant listed without one finds none.
 */
export async function keepTenantRole(env: Env, tenant: string, identity: string, role: string | null, actor: string): Promise<{ before: string | null }> {
  const index = personRolesStub(env, identity);
  if (role !== null) await index.list(identity, tenant);
  const changed = await tenantStub(env, tenant).setRole(tenant, identity, role, actor);
  if (role === null) await index.unlist(identity, tenant).catch((err: unknown) => console.error("roles: a tenant stays listed for a person who holds no role there", err));
  return changed;
}

/** Every role these identities hold, each read from its tenant's own object now (the index only says where to look). */
export async function rolesHeldBy(env: Env, identities: string[]): Promise<RoleRow[]> {
  const found = await Promise.all(
    identities.map(async (identity) => {
      const tenants = await personRolesStub(env, identity).tenants(identity);
      return Promise.all(tenants.map((tenant) => tenantStub(env, tenant).roleOf(tenant, identity)));
    }),
  );
  return found.flat().filter((row) => row !== null);
}

export function appendTenantAudit(env: Env, entry: AuditEntry): Promise<void> {
  return tenantStub(env, entry.tenant).appendAudit(entry.tenant, entry);
}

/** A tenant's trail, newest first, `limit` rows before `beforeSeq`. */
export function tenantAudit(env: Env, tenant: string, limit: number, beforeSeq?: number): Promise<AuditRow[]> {
  return tenantStub(env, tenant).audit(tenant, limit, beforeSeq);
}

/** Sets (or with null, removes) the tenant's record of that kind and appends its trail row, in one transaction; returns the value before, or null. */
export async function putAuditedTenantRecord(env: Env, tenant: string, kind: string, value: unknown, audit: Omit<AuditEntry, "tenant" | "before">): Promise<unknown> {
  const before = await tenantStub(env, tenant).putAuditedRecord(tenant, kind, value === null ? null : JSON.stringify(value), audit);
  return before === null ? null : (JSON.parse(before) as unknown);
}

/** What this isolate last told a tenant's object of a person's name, so a busy chat does not call it on every message. */
const told = new Map<string, string>();
const TOLD_KEPT = 10_000;

/** Keeps a person's name in the object of the tenant their identity's team or guild names (a call only when this isolate has not told it that name). */
export async function rememberPerson(env: Env, person: PersonName): Promise<void> {
  if (told.get(person.identity) === person.name) return;
  const team = access.teamOf(person.identity);
  await tenantStub(env, team).rememberNames(team, [person]);
  if (told.size >= TOLD_KEPT) told.clear();
  told.set(person.identity, person.name);
}

/** The names known for these identities: one call to each team's or guild's tenant object. */
export async function peopleNames(env: Env, identities: string[]): Promise<Record<string, string>> {
  const byTeam = new Map<string, string[]>();
  for (const identity of new Set(identities)) {
    const team = access.teamOf(identity);
    byTeam.set(team, [...(byTeam.get(team) ?? []), identity]);
  }
  const found = await Promise.all([...byTeam].map(([team, asked]) => tenantStub(env, team).namesOf(team, asked)));
  return Object.assign({}, ...found) as Record<string, string>;
}

// A tenant's settings (its own and each agent's), their version and its
// agents (which exist, their descriptions, deleted or not), as its own object
// keeps them (tenant.ts): a change is decided here and its push targets are
// this table's agents, so no deployment-wide object is asked. What an older
// release kept in the control plane is copied in by the object's handover.
import type { SettingKind, SettingsText } from "./settings.ts";

/** `agent` is '' for the tenant's own setting (an agent's name is never empty). */
export const TENANT_SETTINGS_SCHEMA = `CREATE TABLE settings (kind TEXT NOT NULL, agent TEXT NOT NULL, value TEXT NOT NULL, updated_at INTEGER NOT NULL, PRIMARY KEY (kind, agent));
CREATE TABLE agents (agent TEXT PRIMARY KEY, platform TEXT, description TEXT, first_seen INTEGER NOT NULL, deleted_at INTEGER);`;

/** The tenant's settings version, in the store's meta table: it only grows, so a late push never undoes a newer one. */
const VERSION_KEY = "settings_version";

const TENANT_WIDE = "";

/** One of the tenant's agents as its object knows it. */
export interface TenantAgent {
  agent: string;
  platform: string | null;
  description: string | null;
  firstSeen: number;
  deletedAt: number | null;
}

/** What an older release kept for the tenant in the control plane: its settings rows, its version, its agents (the directory's rows, descriptions included). */
export interface OldSettings {
  settings: { kind: string; agent: string | null; value: string }[];
  version: number | null;
  agents: TenantAgent[];
}

const AGENT_COLUMNS = "agent, platform, description, first_seen AS firstSeen, deleted_at AS deletedAt";

function version(sql: SqlStorage): number {
  return Number(sql.exec<{ value: string }>("SELECT value FROM meta WHERE key = ?", VERSION_KEY).toArray()[0]?.value ?? 0);
}

function setVersion(sql: SqlStorage, value: number): void {
  sql.exec("INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value", VERSION_KEY, String(value));
}

function valueOf(sql: SqlStorage, kind: string, agent: string): unknown {
  const row = sql.exec<{ value: string }>("SELECT value FROM settings WHERE kind = ? AND agent = ?", kind, agent).toArray()[0];
  return row ? (JSON.parse(row.value) as unknown) : null;
}

/** What the agent must hold (settings.ts, AgentSettings), as text. */
export function settingsText(sql: SqlStorage, agent: string): SettingsText {
  const both = (kind: SettingKind) => ({ tenant: valueOf(sql, kind, TENANT_WIDE), agent: valueOf(sql, kind, agent) });
  return JSON.stringify({ version: version(sql), mounts: both("mounts"), models: both("models"), secondMessage: both("secondMessage") });
}

/** Sets (or with null, removes) the tenant's (`agent` null) or an agent's setting and bumps the version; returns the value before as JSON, or null. */
export function putSetting(sql: SqlStorage, kind: SettingKind, agent: string | null, value: unknown, now: number): string | null {
  const key = agent ?? TENANT_WIDE;
  const before = sql.exec<{ value: string }>("SELECT value FROM settings WHERE kind = ? AND agent = ?", kind, key).toArray()[0]?.value ?? null;
  if (value === null) sql.exec("DELETE FROM settings WHERE kind = ? AND agent = ?", kind, key);
  else
    sql.exec(
      "INSERT INTO settings (kind, agent, value, updated_at) VALUES (?, ?, ?, ?) ON CONFLICT (kind, agent) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at",
      kind,
      key,
      JSON.stringify(value),
      now,
    );
  setVersion(sql, version(sql) + 1);
  return before;
}

/** Every setting of these kinds the tenant holds, its value as JSON (a platform audit of the secrets they name). */
export function storedSettings(sql: SqlStorage, kinds: SettingKind[]): { kind: SettingKind; agent: string | null; value: string }[] {
  return sql
    .exec<{ kind: SettingKind; agent: string; value: string }>(`SELECT kind, agent, value FROM settings WHERE kind IN (${kinds.map(() => "?").join(", ")}) ORDER BY kind, agent`, ...kinds)
    .toArray()
    .map((row) => ({ kind: row.kind, agent: row.agent === TENANT_WIDE ? null : row.agent, value: row.value }));
}

export function tenantAgent(sql: SqlStorage, agent: string): TenantAgent | null {
  return sql.exec<{ agent: string; platform: string | null; description: string | null; firstSeen: number; deletedAt: number | null }>(`SELECT ${AGENT_COLUMNS} FROM agents WHERE agent = ?`, agent).toArray()[0] ?? null;
}

/** The live agents, by name. */
export function liveAgents(sql: SqlStorage): TenantAgent[] {
  return sql.exec<{ agent: string; platform: string | null; description: string | null; firstSeen: number; deletedAt: number | null }>(`SELECT ${AGENT_COLUMNS} FROM agents WHERE deleted_at IS NULL ORDER BY agent`).toArray();
}

/** Records an agent; false when its name is taken already (by a live or a deleted agent). */
export function insertAgent(sql: SqlStorage, agent: Omit<TenantAgent, "deletedAt">): boolean {
  return sql.exec("INSERT INTO agents (agent, platform, description, first_seen) VALUES (?, ?, ?, ?) ON CONFLICT (agent) DO NOTHING", agent.agent, agent.platform, agent.description, agent.firstSeen).rowsWritten > 0;
}

/** Sets a live agent's description; false when there is none. */
export function describeAgent(sql: SqlStorage, agent: string, description: string | null): boolean {
  return sql.exec("UPDATE agents SET description = ? WHERE agent = ? AND deleted_at IS NULL", description, agent).rowsWritten > 0;
}

export function markAgentDeleted(sql: SqlStorage, agent: string, now: number): void {
  sql.exec("UPDATE agents SET deleted_at = COALESCE(deleted_at, ?) WHERE agent = ?", now, agent);
}

/** Copies what the control plane kept, as it was (the version too, so it goes on growing from there). */
export function keepOldSettings(sql: SqlStorage, old: OldSettings): void {
  for (const row of old.settings) {
    sql.exec("INSERT INTO settings (kind, agent, value, updated_at) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING", row.kind, row.agent ?? TENANT_WIDE, row.value, Date.now());
  }
  for (const agent of old.agents) {
    sql.exec("INSERT INTO agents (agent, platform, description, first_seen, deleted_at) VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING", agent.agent, agent.platform, agent.description, agent.firstSeen, agent.deletedAt);
  }
  if (old.version !== null && old.version > version(sql)) setVersion(sql, old.version);
}

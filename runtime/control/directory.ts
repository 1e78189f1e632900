// The directory: which tenants and agents exist, for the console's navigation
// and for pushing settings to a tenant's agents. A table in the control plane,
// written when an agent object first takes an event (in the same call that
// gives it its settings, runtime/control/settings.ts) and by a Slack install (which
// knows the workspace's name).
import type { Platform, Route } from "../chat.ts";

export const DIRECTORY_SCHEMA = `CREATE TABLE IF NOT EXISTS directory (
  tenant TEXT NOT NULL,
  agent TEXT NOT NULL,
  platform TEXT,
  display_name TEXT,
  first_seen INTEGER NOT NULL,
  PRIMARY KEY (tenant, agent)
)`;

/** Agents created through the Agents API carry a description; a deleted agent keeps its row (its name is not reused) but is listed nowhere. */
export const AGENT_RECORDS_SCHEMA = `ALTER TABLE directory ADD COLUMN description TEXT;
ALTER TABLE directory ADD COLUMN deleted_at INTEGER;`;

export interface DirectoryEntry extends Route {
  platform?: Platform;
  /** The tenant's name on its platform (a Slack workspace's name), where known. */
  displayName?: string;
}

export interface TenantListing {
  tenant: string;
  /** Platforms its agents were first reached from, in order of first use. */
  platforms: string[];
  displayName: string | null;
  agents: number;
  firstSeen: number;
}

export interface AgentListing extends Route {
  platform: string | null;
  displayName: string | null;
  description: string | null;
  firstSeen: number;
}

/** One agent's row, deleted or not. */
export interface AgentRecord extends AgentListing {
  deletedAt: number | null;
}

type DirectoryRow = { tenant: string; agent: string; platform: string | null; display_name: string | null; description: string | null; first_seen: number; deleted_at: number | null };

function listing(row: DirectoryRow): AgentListing {
  return { tenant: row.tenant, agent: row.agent, platform: row.platform, displayName: row.display_name, description: row.description, firstSeen: row.first_seen };
}

/** An agent made through the Agents API: false when the name is taken (by a live or a deleted agent). */
export function createEntry(sql: SqlStorage, entry: Route & { description: string | null }, now: number): boolean {
  return (
    sql.exec("INSERT INTO directory (tenant, agent, platform, description, first_seen) VALUES (?, ?, 'api', ?, ?) ON CONFLICT (tenant, agent) DO NOTHING", entry.tenant, entry.agent, entry.description, now)
      .rowsWritten > 0
  );
}

export function agentRecord(sql: SqlStorage, route: Route): AgentRecord | null {
  const row = sql.exec<DirectoryRow>("SELECT * FROM directory WHERE tenant = ? AND agent = ?", route.tenant, route.agent).toArray()[0];
  return row ? { ...listing(row), deletedAt: row.deleted_at } : null;
}

/** Sets the description of a live agent; false when there is none. */
export function describeEntry(sql: SqlStorage, route: Route, description: string | null): boolean {
  return sql.exec("UPDATE directory SET description = ? WHERE tenant = ? AND agent = ? AND deleted_at IS NULL", description, route.tenant, route.agent).rowsWritten > 0;
}

export function markDeleted(sql: SqlStorage, route: Route, now: number): void {
  sql.exec("UPDATE directory SET deleted_at = COALESCE(deleted_at, ?) WHERE tenant = ? AND agent = ?", now, route.tenant, route.agent);
}

/** The first platform seen stays; a later name replaces an earlier one (a workspace renamed and reinstalled). */
export function recordEntry(sql: SqlStorage, entry: DirectoryEntry, now: number): void {
  sql.exec(
    `INSERT INTO directory (tenant, agent, platform, display_name, first_seen) VALUES (?, ?, ?, ?, ?)
     ON CONFLICT (tenant, agent) DO UPDATE SET platform = COALESCE(directory.platform, excluded.platform), display_name = COALESCE(excluded.display_name, directory.display_name)`,
    entry.tenant,
    entry.agent,
    entry.platform ?? null,
    entry.displayName ?? null,
    now,
  );
}

export function tenantListing(sql: SqlStorage): TenantListing[] {
  return sql
    .exec<{ tenant: string; platforms: string | null; display_name: string | null; agents: number; first_seen: number }>(
      `SELECT tenant, group_concat(platform, ' ') AS platforms, MAX(display_name) AS display_name, COUNT(*) AS agents, MIN(first_seen) AS first_seen
       FROM (SELECT * FROM directory WHERE deleted_at IS NULL ORDER BY first_seen) GROUP BY tenant ORDER BY MIN(first_seen) DESC, tenant`,
    )
    .toArray()
    .map((row) => ({
      tenant: row.tenant,
      platforms: [...new Set((row.platforms ?? "").split(" ").filter(Boolean))],
      displayName: row.display_name,
      agents: row.agents,
      firstSeen: row.first_seen,
    }));
}

/** One tenant's live agents, or every live agent when `tenant` is omitted. */
export function agentListing(sql: SqlStorage, tenant?: string): AgentListing[] {
  const rows =
    tenant === undefined
      ? sql.exec<DirectoryRow>("SELECT * FROM directory WHERE deleted_at IS NULL ORDER BY tenant, agent")
      : sql.exec<DirectoryRow>("SELECT * FROM directory WHERE tenant = ? AND deleted_at IS NULL ORDER BY agent", tenant);
  return rows.toArray().map(listing);
}

// The directory: which tenants and agents exist, for the console's navigation
// and the daily fold: the platform's own facts (names, platform, dates), never
// a tenant's data. A table in the control plane, written by a tenant's object
// when it first records an agent (at the agent's first event, its creation
// through the Agents API, a Slack install, which knows the workspace's name)
// and when it deletes one. Each tenant's object keeps its own agents with
// their descriptions (tenant-settings.ts); descriptions an older release kept
// here are handed over to it and dropped.
import type { Platform, Route } from "../chat.ts";
import type { TenantAgent } from "./tenant-settings.ts";

export const DIRECTORY_SCHEMA = `CREATE TABLE IF NOT EXISTS directory (
  tenant TEXT NOT NULL,
  agent TEXT NOT NULL,
  platform TEXT,
  display_name TEXT,
  first_seen INTEGER NOT NULL,
  PRIMARY KEY (tenant, agent)
)`;

/** A deleted agent keeps its row but is listed nowhere. `description` is written no more (each tenant's object keeps its agents'); an older release's are handed over and set to NULL. */
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
  firstSeen: number;
}

type DirectoryRow = { tenant: string; agent: string; platform: string | null; display_name: string | null; first_seen: number };

function listing(row: DirectoryRow): AgentListing {
  return { tenant: row.tenant, agent: row.agent, platform: row.platform, displayName: row.display_name, firstSeen: row.first_seen };
}

export function markDeleted(sql: SqlStorage, route: Route, now: number): void {
  sql.exec("UPDATE directory SET deleted_at = COALESCE(deleted_at, ?) WHERE tenant = ? AND agent = ?", now, route.tenant, route.agent);
}

/** A tenant's agents as an older release kept them, deleted ones and descriptions included: its object copies them (its handover). */
export function oldAgentsOf(sql: SqlStorage, tenant: string): TenantAgent[] {
  return sql
    .exec<{ agent: string; platform: string | null; description: string | null; firstSeen: number; deletedAt: number | null }>(
      "SELECT agent, platform, description, first_seen AS firstSeen, deleted_at AS deletedAt FROM directory WHERE tenant = ? ORDER BY agent",
      tenant,
    )
    .toArray();
}

/** Once the tenant's object holds them: the tenant's descriptions dropped from here. */
export function dropDescriptions(sql: SqlStorage, tenant: string): void {
  sql.exec("UPDATE directory SET description = NULL WHERE tenant = ? AND description IS NOT NULL", tenant);
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
      ? sql.exec<DirectoryRow>("SELECT tenant, agent, platform, display_name, first_seen FROM directory WHERE deleted_at IS NULL ORDER BY tenant, agent")
      : sql.exec<DirectoryRow>("SELECT tenant, agent, platform, display_name, first_seen FROM directory WHERE tenant = ? AND deleted_at IS NULL ORDER BY agent", tenant);
  return rows.toArray().map(listing);
}

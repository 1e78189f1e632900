// A tenant's API keys, as its own object keeps them (tenant.ts): by the
// SHA-256 of the whole key, never the key, so a copy of the rows opens
// nothing. The policy (who may make one, what a key reaches) is
// runtime/access's; this file only keeps the rows. A key made by a release
// before this one was a row of the control plane's; its row is copied here by
// the object's handover and marked `handed_over`.
import type { KeyAccess, KeyRow } from "./access-tables.ts";

export const TENANT_KEYS_SCHEMA = `CREATE TABLE api_keys (
  id TEXT PRIMARY KEY,
  hash TEXT NOT NULL UNIQUE,
  name TEXT NOT NULL,
  access TEXT NOT NULL,
  agent TEXT,
  created_at INTEGER NOT NULL,
  created_by TEXT NOT NULL,
  last_used_at INTEGER,
  revoked_at INTEGER,
  handed_over INTEGER NOT NULL DEFAULT 0
)`;

/** A key's row with its hash, as the handover carries it between the two objects. */
export type HandedKey = KeyRow & { hash: string };

/** A key to keep: the object's tenant names it, so the row names none. */
export interface TenantKey {
  id: string;
  hash: string;
  name: string;
  access: KeyAccess;
  agent: string | null;
  createdBy: string;
}

const COLUMNS = "id, name, access, agent, created_at AS createdAt, created_by AS createdBy, last_used_at AS lastUsedAt, revoked_at AS revokedAt";

/** A key's last use is written at most this often: every request reads the key, few need to write. */
const LAST_USED_RESOLUTION_MS = 60_000;

type Row = Omit<KeyRow, "tenant">;

const withTenant = (tenant: string, row: Row): KeyRow => ({ id: row.id, tenant, name: row.name, access: row.access, agent: row.agent, createdAt: row.createdAt, createdBy: row.createdBy, lastUsedAt: row.lastUsedAt, revokedAt: row.revokedAt });

/** Null when a key with this id exists already (a console form sent twice names the same id). */
export function insertKey(sql: SqlStorage, tenant: string, key: TenantKey, now: number): KeyRow | null {
  const inserted = sql.exec(
    "INSERT INTO api_keys (id, hash, name, access, agent, created_at, created_by) VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING",
    key.id,
    key.hash,
    key.name,
    key.access,
    key.agent,
    now,
    key.createdBy,
  ).rowsWritten;
  return inserted > 0 ? keyById(sql, tenant, key.id) : null;
}

/** Copies a row the control plane kept, as it was (its dates, its revocation); one already here is left as it is. */
export function copyKey(sql: SqlStorage, key: HandedKey): void {
  sql.exec(
    "INSERT INTO api_keys (id, hash, name, access, agent, created_at, created_by, last_used_at, revoked_at, handed_over) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 1) ON CONFLICT DO NOTHING",
    key.id,
    key.hash,
    key.name,
    key.access,
    key.agent,
    key.createdAt,
    key.createdBy,
    key.lastUsedAt,
    key.revokedAt,
  );
}

export function keysOf(sql: SqlStorage, tenant: string): KeyRow[] {
  return sql
    .exec<Row>(`SELECT ${COLUMNS} FROM api_keys ORDER BY created_at, id`)
    .toArray()
    .map((row) => withTenant(tenant, row));
}

function keyById(sql: SqlStorage, tenant: string, id: string): KeyRow | null {
  const row = sql.exec<Row>(`SELECT ${COLUMNS} FROM api_keys WHERE id = ?`, id).toArray()[0];
  return row ? withTenant(tenant, row) : null;
}

/** The live key with this hash, its last use recorded; null for an unknown or revoked key. */
export function useKey(sql: SqlStorage, tenant: string, hash: string, now: number): KeyRow | null {
  const row = sql.exec<Row>(`SELECT ${COLUMNS} FROM api_keys WHERE hash = ? AND revoked_at IS NULL`, hash).toArray()[0];
  if (!row) return null;
  if (row.lastUsedAt === null || row.lastUsedAt <= now - LAST_USED_RESOLUTION_MS) {
    sql.exec("UPDATE api_keys SET last_used_at = ? WHERE id = ?", now, row.id);
    row.lastUsedAt = now;
  }
  return withTenant(tenant, row);
}

/** Revokes a live key; the row stays, so the list shows when it ended. Null when there is no such live key; else the row and, for a key an older release made, its hash. */
export function revokeKey(sql: SqlStorage, tenant: string, id: string, now: number): { row: KeyRow; oldHash: string | null } | null {
  const done = sql.exec<{ hash: string; handed_over: number }>("UPDATE api_keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL RETURNING hash, handed_over", now, id).toArray()[0];
  if (!done) return null;
  return { row: keyById(sql, tenant, id)!, oldHash: done.handed_over ? done.hash : null };
}

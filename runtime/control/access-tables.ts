// The access tables of the control plane, as releases before this one left
// them: roles per tenant, the audit trail, API keys. Each now lives in its
// tenant's own object (tenant-keys.ts, tenant-access.ts): that object takes
// a tenant's rows over at its first touch (reads them here, then they are
// deleted here), so what remains is only what the handover reads and clears,
// and of an old key, which does not name its tenant, its hash and tenant
// (old_keys). The audit table refuses an UPDATE; since the trail moved, a
// DELETE by the handover is allowed (AUDIT_MOVES).
import type { HandedAuditRow, RoleRow } from "./tenant-access.ts";

export const ACCESS_SCHEMA = `CREATE TABLE api_keys (
  id TEXT PRIMARY KEY,
  tenant TEXT NOT NULL,
  hash TEXT NOT NULL UNIQUE,
  name TEXT NOT NULL,
  access TEXT NOT NULL,
  agent TEXT,
  created_at INTEGER NOT NULL,
  created_by TEXT NOT NULL,
  last_used_at INTEGER,
  revoked_at INTEGER
);
CREATE INDEX api_keys_tenant ON api_keys (tenant, created_at);
CREATE TABLE roles (
  tenant TEXT NOT NULL,
  identity TEXT NOT NULL,
  role TEXT NOT NULL,
  granted_at INTEGER NOT NULL,
  granted_by TEXT NOT NULL,
  PRIMARY KEY (tenant, identity)
);
CREATE TABLE audit (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  tenant TEXT NOT NULL,
  at INTEGER NOT NULL,
  actor TEXT NOT NULL,
  action TEXT NOT NULL,
  subject TEXT NOT NULL,
  before TEXT,
  after TEXT
);
CREATE INDEX audit_tenant ON audit (tenant, seq);
CREATE TRIGGER audit_no_update BEFORE UPDATE ON audit BEGIN SELECT RAISE(ABORT, 'the audit trail is append-only'); END;
CREATE TRIGGER audit_no_delete BEFORE DELETE ON audit BEGIN SELECT RAISE(ABORT, 'the audit trail is append-only'); END`;

/** A change appended from another object (runtime/object/audit-outbox.ts) carries its effect's id: appended twice, it is one row. */
export const AUDIT_DEDUPE_SCHEMA = `ALTER TABLE audit ADD COLUMN dedupe TEXT;
CREATE UNIQUE INDEX audit_dedupe ON audit (dedupe)`;

/**
 * The tenant of each live key an older release made, by the key's hash: the
 * key names no tenant, so the Worker asks here which tenant's object checks
 * it (and keeps the answer, which never changes). Filled from api_keys as a
 * tenant's object takes those rows over; a revoked key's row is deleted.
 */
export const OLD_KEYS_SCHEMA = "CREATE TABLE old_keys (hash TEXT PRIMARY KEY, tenant TEXT NOT NULL)";

/** The trail moves to the tenants' objects: the handover deletes a tenant's rows once its object holds them (an UPDATE is still refused). */
export const AUDIT_MOVES = "DROP TRIGGER audit_no_delete";

/** What a key may do: `admin` also manages its tenant's keys, roles and webhook secret; `read` may only read. */
export type KeyAccess = "admin" | "write" | "read";

export type KeyRow = {
  id: string;
  tenant: string;
  name: string;
  access: KeyAccess;
  agent: string | null;
  createdAt: number;
  createdBy: string;
  lastUsedAt: number | null;
  revokedAt: number | null;
};

/** The columns a KeyRow is read from, named as it names them, and its hash. */
const OLD_KEY_COLUMNS = "id, tenant, hash, name, access, agent, created_at AS createdAt, created_by AS createdBy, last_used_at AS lastUsedAt, revoked_at AS revokedAt";

export function oldKeysOf(sql: SqlStorage, tenant: string): (KeyRow & { hash: string })[] {
  return sql.exec<KeyRow & { hash: string }>(`SELECT ${OLD_KEY_COLUMNS} FROM api_keys WHERE tenant = ? ORDER BY created_at, id`, tenant).toArray();
}

/** A tenant's rows in api_keys deleted, the live ones' hashes kept in old_keys (call in a transaction). */
export function clearOldKeys(sql: SqlStorage, tenant: string): void {
  sql.exec("INSERT INTO old_keys (hash, tenant) SELECT hash, tenant FROM api_keys WHERE tenant = ? AND revoked_at IS NULL ON CONFLICT (hash) DO NOTHING", tenant);
  sql.exec("DELETE FROM api_keys WHERE tenant = ?", tenant);
}

export function oldKeyTenant(sql: SqlStorage, hash: string): string | null {
  return (
    sql.exec<{ tenant: string }>("SELECT tenant FROM old_keys WHERE hash = ? UNION ALL SELECT tenant FROM api_keys WHERE hash = ? AND revoked_at IS NULL", hash, hash).toArray()[0]?.tenant ?? null
  );
}

// ---- what the tenants' objects take over (tenant.ts): a tenant's roles and trail, read, then deleted ----

const ROLE_COLUMNS = "tenant, identity, role, granted_at AS grantedAt, granted_by AS grantedBy";

export function rolesOf(sql: SqlStorage, tenant: string): RoleRow[] {
  return sql.exec<RoleRow>(`SELECT ${ROLE_COLUMNS} FROM roles WHERE tenant = ? ORDER BY identity`, tenant).toArray();
}

/** Every role these identities hold here, in every tenant (one bound parameter, however many): a person's index of tenants takes them over. */
export function rolesHeldBy(sql: SqlStorage, identities: string[]): RoleRow[] {
  return sql.exec<RoleRow>(`SELECT ${ROLE_COLUMNS} FROM roles WHERE identity IN (SELECT value FROM json_each(?)) ORDER BY tenant, identity`, JSON.stringify(identities)).toArray();
}

export function clearRoles(sql: SqlStorage, tenant: string): void {
  sql.exec("DELETE FROM roles WHERE tenant = ?", tenant);
}

/** A tenant's whole trail, oldest first, with each row's dedupe key. */
export function oldAuditOf(sql: SqlStorage, tenant: string): HandedAuditRow[] {
  return sql.exec<HandedAuditRow>("SELECT seq, tenant, at, actor, action, subject, before, after, dedupe FROM audit WHERE tenant = ? ORDER BY seq", tenant).toArray();
}

export function clearAudit(sql: SqlStorage, tenant: string): void {
  sql.exec("DELETE FROM audit WHERE tenant = ?", tenant);
}

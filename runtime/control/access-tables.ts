// The access tables of the control plane: roles per tenant, the audit trail,
// and what is left of API keys: a key lives in its tenant's own object
// (tenant-keys.ts); the rows an older release kept here (api_keys, by the
// SHA-256 of the key, never the key) wait for that object to take them over,
// and then only an old key's hash and tenant stay (old_keys), since such a
// key does not name its tenant. The policy (who may do what) is
// runtime/access's; this file only keeps the rows. The audit table is
// append-only: SQLite itself refuses an UPDATE or DELETE.

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

export type RoleRow = {
  tenant: string;
  identity: string;
  role: string;
  grantedAt: number;
  grantedBy: string;
};

export interface AuditEntry {
  tenant: string;
  actor: string;
  action: string;
  subject: string;
  before: unknown;
  after: unknown;
  /** Names the change once: a second append with the same key is a no-op (a courier's retry). */
  key?: string;
}

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

const ROLE_COLUMNS = "tenant, identity, role, granted_at AS grantedAt, granted_by AS grantedBy";

export function rolesOf(sql: SqlStorage, tenant: string): RoleRow[] {
  return sql.exec<RoleRow>(`SELECT ${ROLE_COLUMNS} FROM roles WHERE tenant = ? ORDER BY identity`, tenant).toArray();
}

/** Every role these identities hold, in every tenant (one bound parameter, however many). */
export function rolesHeldBy(sql: SqlStorage, identities: string[]): RoleRow[] {
  return sql.exec<RoleRow>(`SELECT ${ROLE_COLUMNS} FROM roles WHERE identity IN (SELECT value FROM json_each(?)) ORDER BY tenant, identity`, JSON.stringify(identities)).toArray();
}

/** Sets (or with null, removes) a person's role in a tenant; returns the role held before. */
export function setRole(sql: SqlStorage, tenant: string, identity: string, role: string | null, by: string, now: number): string | null {
  const before = sql.exec<{ role: string }>("SELECT role FROM roles WHERE tenant = ? AND identity = ?", tenant, identity).toArray()[0]?.role ?? null;
  if (role === null) sql.exec("DELETE FROM roles WHERE tenant = ? AND identity = ?", tenant, identity);
  else
    sql.exec(
      "INSERT INTO roles (tenant, identity, role, granted_at, granted_by) VALUES (?, ?, ?, ?, ?) ON CONFLICT (tenant, identity) DO UPDATE SET role = excluded.role, granted_at = excluded.granted_at, granted_by = excluded.granted_by",
      tenant,
      identity,
      role,
      now,
      by,
    );
  return before;
}

/** Values are kept as JSON text, cut to this many characters: the trail says what changed, it is no backup. */
const AUDIT_VALUE_CHARS = 8_000;

const asText = (value: unknown): string | null => (value === undefined || value === null ? null : JSON.stringify(value).slice(0, AUDIT_VALUE_CHARS));

export function appendAudit(sql: SqlStorage, entry: AuditEntry, now: number): void {
  sql.exec(
    "INSERT INTO audit (tenant, at, actor, action, subject, before, after, dedupe) VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (dedupe) DO NOTHING",
    entry.tenant,
    now,
    entry.actor,
    entry.action,
    entry.subject,
    asText(entry.before),
    asText(entry.after),
    entry.key ?? null,
  );
}

/** A row as kept: `before` and `after` are JSON text (cut to AUDIT_VALUE_CHARS, so perhaps no longer JSON). */
export type AuditRow = { seq: number; tenant: string; at: number; actor: string; action: string; subject: string; before: string | null; after: string | null };

/** A tenant's trail, newest first, `limit` rows before `beforeSeq` (a page cursor). */
export function auditOf(sql: SqlStorage, tenant: string, limit: number, beforeSeq?: number): AuditRow[] {
  return sql.exec<AuditRow>("SELECT seq, tenant, at, actor, action, subject, before, after FROM audit WHERE tenant = ? AND seq < ? ORDER BY seq DESC LIMIT ?", tenant, beforeSeq ?? Number.MAX_SAFE_INTEGER, limit).toArray();
}

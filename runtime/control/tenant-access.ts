// A tenant's roles, its audit trail and its people's names, as the tenant's
// own object keeps them (tenant.ts): the object is the tenant, so no row
// names one. The policy (who may do what) is runtime/access's; this file only
// keeps the rows. The trail is append-only (SQLite itself refuses an UPDATE or
// DELETE) and a change appended twice under one dedupe key (a courier's
// retry) is one row. Releases before kept these rows in the control plane
// (access-tables.ts, people.ts); the object's handover copies them here as
// they were, the trail's with its order (seq) and dedupe keys.

export const TENANT_ACCESS_SCHEMA = `CREATE TABLE roles (
  identity TEXT PRIMARY KEY,
  role TEXT NOT NULL,
  granted_at INTEGER NOT NULL,
  granted_by TEXT NOT NULL
);
CREATE TABLE audit (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  at INTEGER NOT NULL,
  actor TEXT NOT NULL,
  action TEXT NOT NULL,
  subject TEXT NOT NULL,
  before TEXT,
  after TEXT,
  dedupe TEXT UNIQUE
);
CREATE TRIGGER audit_no_update BEFORE UPDATE ON audit BEGIN SELECT RAISE(ABORT, 'the audit trail is append-only'); END;
CREATE TRIGGER audit_no_delete BEFORE DELETE ON audit BEGIN SELECT RAISE(ABORT, 'the audit trail is append-only'); END;
CREATE TABLE people (identity TEXT PRIMARY KEY, name TEXT NOT NULL, updated_at INTEGER NOT NULL)`;

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

/** A row as kept: `before` and `after` are JSON text (cut to AUDIT_VALUE_CHARS, so perhaps no longer JSON). */
export type AuditRow = { seq: number; tenant: string; at: number; actor: string; action: string; subject: string; before: string | null; after: string | null };

/** A trail row as the handover carries it between the two objects, with its dedupe key. */
export type HandedAuditRow = AuditRow & { dedupe: string | null };

export type PersonName = { identity: string; name: string };

// ---- roles ----

const ROLE_COLUMNS = "identity, role, granted_at AS grantedAt, granted_by AS grantedBy";

export function rolesIn(sql: SqlStorage, tenant: string): RoleRow[] {
  return sql
    .exec<Omit<RoleRow, "tenant">>(`SELECT ${ROLE_COLUMNS} FROM roles ORDER BY identity`)
    .toArray()
    .map((row) => ({ tenant, ...row }));
}

export function roleOf(sql: SqlStorage, tenant: string, identity: string): RoleRow | null {
  const row = sql.exec<Omit<RoleRow, "tenant">>(`SELECT ${ROLE_COLUMNS} FROM roles WHERE identity = ?`, identity).toArray()[0];
  return row ? { tenant, ...row } : null;
}

/** Sets (or with null, removes) a person's role; returns the role held before. */
export function setRole(sql: SqlStorage, identity: string, role: string | null, by: string, now: number): string | null {
  const before = sql.exec<{ role: string }>("SELECT role FROM roles WHERE identity = ?", identity).toArray()[0]?.role ?? null;
  if (role === null) sql.exec("DELETE FROM roles WHERE identity = ?", identity);
  else
    sql.exec(
      "INSERT INTO roles (identity, role, granted_at, granted_by) VALUES (?, ?, ?, ?) ON CONFLICT (identity) DO UPDATE SET role = excluded.role, granted_at = excluded.granted_at, granted_by = excluded.granted_by",
      identity,
      role,
      now,
      by,
    );
  return before;
}

/** Copies a role the control plane kept, as it was; one set here since is left as it is. */
export function copyRole(sql: SqlStorage, row: RoleRow): void {
  sql.exec("INSERT INTO roles (identity, role, granted_at, granted_by) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING", row.identity, row.role, row.grantedAt, row.grantedBy);
}

// ---- the audit trail ----

/** Values are kept as JSON text, cut to this many characters: the trail says what changed, it is no backup. */
const AUDIT_VALUE_CHARS = 8_000;

const asText = (value: unknown): string | null => (value === undefined || value === null ? null : JSON.stringify(value).slice(0, AUDIT_VALUE_CHARS));

export function appendAudit(sql: SqlStorage, entry: Omit<AuditEntry, "tenant">, now: number): void {
  sql.exec(
    "INSERT INTO audit (at, actor, action, subject, before, after, dedupe) VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (dedupe) DO NOTHING",
    now,
    entry.actor,
    entry.action,
    entry.subject,
    asText(entry.before),
    asText(entry.after),
    entry.key ?? null,
  );
}

/** Copies a row the control plane kept, with its seq (so the trail keeps its order, and later rows come after it) and dedupe key. */
export function copyAudit(sql: SqlStorage, row: HandedAuditRow): void {
  sql.exec(
    "INSERT INTO audit (seq, at, actor, action, subject, before, after, dedupe) VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
    row.seq,
    row.at,
    row.actor,
    row.action,
    row.subject,
    row.before,
    row.after,
    row.dedupe,
  );
}

/** The tenant's trail, newest first, `limit` rows before `beforeSeq` (a page cursor). */
export function auditPage(sql: SqlStorage, tenant: string, limit: number, beforeSeq?: number): AuditRow[] {
  return sql
    .exec<Omit<AuditRow, "tenant">>("SELECT seq, at, actor, action, subject, before, after FROM audit WHERE seq < ? ORDER BY seq DESC LIMIT ?", beforeSeq ?? Number.MAX_SAFE_INTEGER, limit)
    .toArray()
    .map((row) => ({ ...row, tenant }));
}

// ---- people's names ----

/** A name is for showing: cut to this many characters. */
const NAME_CHARS = 100;

/** Keeps each person's name; a row is written only when the name changed. */
export function rememberNames(sql: SqlStorage, people: PersonName[], now: number): void {
  for (const { identity, name } of people) {
    const shown = name.trim().slice(0, NAME_CHARS);
    if (shown === "") continue;
    sql.exec(
      "INSERT INTO people (identity, name, updated_at) VALUES (?, ?, ?) ON CONFLICT (identity) DO UPDATE SET name = excluded.name, updated_at = excluded.updated_at WHERE people.name <> excluded.name",
      identity,
      shown,
      now,
    );
  }
}

/** The names known for these identities (one bound parameter, however many). */
export function namesOf(sql: SqlStorage, identities: string[]): Record<string, string> {
  const rows = sql.exec<PersonName>("SELECT identity, name FROM people WHERE identity IN (SELECT value FROM json_each(?))", JSON.stringify(identities)).toArray();
  return Object.fromEntries(rows.map((r) => [r.identity, r.name]));
}

/** Copies names the control plane kept; one written here since is left as it is. */
export function copyNames(sql: SqlStorage, people: (PersonName & { updatedAt: number })[]): void {
  for (const p of people) sql.exec("INSERT INTO people (identity, name, updated_at) VALUES (?, ?, ?) ON CONFLICT DO NOTHING", p.identity, p.name, p.updatedAt);
}

/** The team (Slack) or guild (Discord) an identity names: the tenant whose object keeps the person's name. */
export function teamOf(identity: string): string {
  return identity.split(":")[1] ?? "";
}

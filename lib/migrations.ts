// The one way a Durable Object's SQLite schema changes: a store declares an
// ordered, append-only list of named migrations, and the first touch after a
// deploy applies the ones its storage has not seen, in one transaction. The
// count applied is kept in the store's `meta` table (key `schema_version`),
// which this runner creates: a migration never creates `meta` itself.

export interface Migration {
  /** Said when it fails: what it adds, in a few words. */
  readonly name: string;
  /** One or more statements. A store's first migration uses IF NOT EXISTS, so tables an unversioned release wrote are adopted. */
  readonly sql: string;
}

/** A migration failed and was rolled back with the ones before it in the same run: the schema is as it was. */
export class MigrationError extends Error {
  override name = "MigrationError";

  constructor(
    /** "<number> <name>", as the list counts from 1. */
    readonly migration: string,
    cause: unknown,
  ) {
    super(`schema migration ${migration} failed and was rolled back (${cause instanceof Error ? cause.message : String(cause)}); the object serves nothing until a deploy fixes it`);
  }
}

const META = "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)";

/** How many of a store's migrations its storage has applied (0: none, or no schema at all). */
export function schemaVersion(sql: SqlStorage): number {
  // Asked of sqlite_master first: reading an absent table throws, and a read must write nothing.
  if (sql.exec("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'meta'").toArray().length === 0) return 0;
  const row = sql.exec<{ value: string }>("SELECT value FROM meta WHERE key = 'schema_version'").toArray()[0];
  return row ? Number(row.value) : 0;
}

/**
 * Applies the migrations the storage has not seen, all in one transaction, and
 * records how many it has. A storage already as new (or newer: a rollback to an
 * older deploy, which migrations stay additive for) is left as it is. Throws
 * MigrationError naming the migration that failed; nothing of the run is kept.
 */
export function runMigrations(storage: DurableObjectStorage, migrations: readonly Migration[]): void {
  const applied = schemaVersion(storage.sql);
  if (applied >= migrations.length) return;
  let current = "";
  try {
    storage.transactionSync(() => {
      storage.sql.exec(META);
      for (let index = applied; index < migrations.length; index++) {
        current = `${index + 1} (${migrations[index]!.name})`;
        storage.sql.exec(migrations[index]!.sql);
      }
      storage.sql.exec("INSERT OR REPLACE INTO meta (key, value) VALUES ('schema_version', ?)", String(migrations.length));
    });
  } catch (err) {
    throw new MigrationError(current || `to version ${migrations.length}`, err);
  }
}

/** The failure named by an error, also one that crossed an RPC boundary (it arrives as a plain Error whose message starts with the class name). */
export function migrationFailure(err: unknown): string | null {
  if (err instanceof MigrationError) return err.message;
  if (err instanceof Error && err.message.startsWith("MigrationError: ")) return err.message.slice("MigrationError: ".length);
  return null;
}

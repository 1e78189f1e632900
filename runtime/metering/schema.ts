// The busy-time tables in the agent object's SQLite (runtime/metering/busy-time.ts).
// The object's migration list (runtime/object/schema.ts) runs them in its
// order; only this room queries them (test/node/table-owners.test.mjs), and a
// released statement is never edited (docs/design.md, "Migrations").

/** Object busy time per turn and per hour. shipped_ms: how much of the hour was handed to a courier for the ledger. */
export const BUSY_TIME_TABLES = `
  CREATE TABLE busy_turns (
    conversation TEXT NOT NULL,
    turn INTEGER NOT NULL,
    busy_ms REAL NOT NULL,
    handlers INTEGER NOT NULL,
    at INTEGER NOT NULL,
    PRIMARY KEY (conversation, turn)
  );
  CREATE TABLE busy_hours (hour INTEGER PRIMARY KEY, busy_ms REAL NOT NULL, passes INTEGER NOT NULL, handlers INTEGER NOT NULL, shipped_ms REAL NOT NULL DEFAULT 0);
`;

/** The object's busy time that served no turn, per hour and part: with busy_turns it adds up to busy_hours. */
export const BUSY_OUTSIDE_TABLE = `CREATE TABLE busy_outside (hour INTEGER NOT NULL, part TEXT NOT NULL, busy_ms REAL NOT NULL, PRIMARY KEY (hour, part));`;

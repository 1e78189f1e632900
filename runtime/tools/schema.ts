// The tools' tables in the agent object's SQLite. The object's migration list
// (runtime/object/schema.ts) runs them in its order; only this room queries
// them (test/node/table-owners.test.mjs), and a released statement is never
// edited (docs/design.md, "Migrations").

/** One row per tool call, written before the call: replay after an eviction reads it. */
export const TOOL_CALLS_TABLE = `
  CREATE TABLE tool_calls (
    key TEXT PRIMARY KEY,
    conversation TEXT NOT NULL,
    turn INTEGER NOT NULL,
    name TEXT NOT NULL,
    call TEXT NOT NULL,
    status TEXT NOT NULL,
    result TEXT,
    started_at INTEGER NOT NULL,
    done_at INTEGER
  );
`;

/** Per-mount plugin session state. */
export const MOUNT_SESSIONS_TABLE = `
  CREATE TABLE mount_sessions (alias TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL, PRIMARY KEY (alias, key));
`;

/**
 * What a leased mount (a machine) holds per conversation, and when it ends (runtime/tools/leases.ts).
 * mount: as last used, so an unmounted one still ends; state: open, or ending (its effect under way).
 */
export const LEASES_TABLE = `
  CREATE TABLE leases (
    alias TEXT NOT NULL,
    conversation TEXT NOT NULL,
    mount TEXT NOT NULL,
    idle_ms INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    postponed INTEGER NOT NULL,
    warned INTEGER NOT NULL,
    state TEXT NOT NULL,
    PRIMARY KEY (alias, conversation)
  );
`;

/** Retention (runtime/store/archive.ts): a conversation's calls archived with it, and the calls of ended turns leave by age. */
export const TOOL_CALLS_RETENTION = `
  CREATE INDEX tool_calls_by_conversation ON tool_calls (conversation);
  CREATE INDEX tool_calls_done ON tool_calls (done_at) WHERE status = 'done';
`;

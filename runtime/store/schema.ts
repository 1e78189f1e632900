// The store's tables in the agent object's SQLite. The object's migration list
// (runtime/object/schema.ts) runs them in its order; only this room queries
// them (test/node/table-owners.test.mjs), and a released statement is never
// edited (docs/design.md, "Migrations").

/** Every inbound event id ever accepted: platform retries stop here. */
export const INBOUND_TABLE = `
  CREATE TABLE inbound (event_id TEXT PRIMARY KEY, conversation TEXT NOT NULL, kind TEXT NOT NULL, at INTEGER NOT NULL);
`;

/** The append-only log a conversation is folded from (messages and turn marks). */
export const LOG_TABLE = `
  CREATE TABLE log (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    conversation TEXT NOT NULL,
    turn INTEGER NOT NULL,
    type TEXT NOT NULL,
    data TEXT NOT NULL,
    at INTEGER NOT NULL
  );
  CREATE INDEX log_by_conversation ON log (conversation, seq);
  CREATE INDEX log_turn_starts ON log (conversation, turn) WHERE type = 'turn_start';
`;

/** A projection of the log kept in the same transaction, for cheap lookups. */
export const CONVERSATIONS_TABLE = `
  CREATE TABLE conversations (
    id TEXT PRIMARY KEY,
    status TEXT NOT NULL,
    turn INTEGER NOT NULL DEFAULT 0,
    reply_to TEXT,
    started_by TEXT NOT NULL,
    error TEXT,
    input_tokens INTEGER NOT NULL DEFAULT 0,
    output_tokens INTEGER NOT NULL DEFAULT 0,
    cost REAL NOT NULL DEFAULT 0,
    -- Set when an event, a reply or a decision reaches it: the next pass advances it.
    pass_due INTEGER NOT NULL DEFAULT 0,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
  );
  CREATE INDEX conversations_running ON conversations (status) WHERE status = 'running';
  CREATE INDEX conversations_due ON conversations (pass_due) WHERE pass_due = 1;
  CREATE INDEX conversations_recent ON conversations (updated_at);
`;

/**
 * Person messages waiting for the running turn's next model call (steering),
 * and runtime notes (a decided hold) for the same moment.
 */
export const INBOX_TABLE = `
  CREATE TABLE inbox (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    conversation TEXT NOT NULL,
    type TEXT NOT NULL,
    data TEXT NOT NULL,
    at INTEGER NOT NULL
  );
  CREATE INDEX inbox_by_conversation ON inbox (conversation, seq);
`;

/**
 * Retention (runtime/store/archive.ts): a conversation archived to R2 keeps
 * only its row, marked when; the slices find the next ones without walking
 * the archived, and old inbound ids leave by age.
 */
export const CONVERSATIONS_ARCHIVED = `
  ALTER TABLE conversations ADD COLUMN archived_at INTEGER;
  CREATE INDEX conversations_unarchived ON conversations (updated_at) WHERE archived_at IS NULL;
  CREATE INDEX inbound_at ON inbound (at);
`;

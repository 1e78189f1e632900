// The holds table in the agent object's SQLite. The object's migration list
// (runtime/object/schema.ts) runs it in its order; only approvals/ queries it
// (test/node/table-owners.test.mjs), and a released statement is never edited
// (docs/design.md, "Migrations").

/** Calls held for a person's decision (approvals/holds.ts). */
export const HOLDS_TABLE = `
  CREATE TABLE holds (
    id TEXT PRIMARY KEY,
    conversation TEXT NOT NULL,
    call_key TEXT NOT NULL UNIQUE,
    tool TEXT NOT NULL,
    args TEXT NOT NULL,
    requested_by TEXT NOT NULL,
    requester TEXT,
    status TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    decided_by TEXT,
    decided_at INTEGER,
    outcome TEXT
  );
  CREATE INDEX holds_by_status ON holds (status, conversation);
`;

/** Retention (runtime/store/archive.ts): a conversation's holds are archived with it. */
export const HOLDS_BY_CONVERSATION_INDEX = `
  CREATE INDEX holds_by_conversation ON holds (conversation);
`;

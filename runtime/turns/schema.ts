// The delegations table in the agent object's SQLite. The object's migration
// list (runtime/object/schema.ts) runs it in its order; only this room queries
// it (test/node/table-owners.test.mjs), and a released statement is never
// edited (docs/design.md, "Migrations").

/**
 * Subagents (runtime/turns/delegation.ts): a parent's `delegate` call (its
 * tool_calls key) and the child run that answers it. conversation: the
 * parent's; state: queued (waiting for a slot), running, or answered (the call
 * has its result); turn_ms: the child's turn limit as configured when it was
 * asked for, deadline: when a running one is stopped.
 */
export const DELEGATIONS_TABLE = `
  CREATE TABLE delegations (
    call_key TEXT PRIMARY KEY,
    conversation TEXT NOT NULL,
    turn INTEGER NOT NULL,
    child TEXT NOT NULL UNIQUE,
    task TEXT NOT NULL,
    mounts TEXT,
    state TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    turn_ms INTEGER NOT NULL,
    deadline INTEGER
  );
  CREATE INDEX delegations_by_conversation ON delegations (conversation, state);
`;

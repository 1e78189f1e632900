// The effects' and the outbox's tables in the agent object's SQLite. The
// object's migration list (runtime/object/schema.ts) runs them in its order;
// only this room queries them (test/node/table-owners.test.mjs), and a
// released statement is never edited (docs/design.md, "Migrations").

/** Chat messages to send, written with the state that produced them. */
export const OUTBOX_TABLE = `
  CREATE TABLE outbox (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    conversation TEXT NOT NULL,
    address TEXT NOT NULL,
    message TEXT NOT NULL,
    ref_key TEXT,
    status TEXT NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    ref TEXT,
    error TEXT,
    created_at INTEGER NOT NULL,
    sent_at INTEGER
  );
  CREATE INDEX outbox_by_conversation ON outbox (conversation, status, id);
`;

/** The platform reference of a message updated in place (a turn's status, a card). */
export const MESSAGE_REFS_TABLE = `
  CREATE TABLE message_refs (ref_key TEXT PRIMARY KEY, ref TEXT NOT NULL);
`;

/** What must happen off the object, next to the row it belongs to (runtime/effects/effects.ts). */
export const EFFECTS_TABLE = `
  CREATE TABLE effects (
    kind TEXT NOT NULL,
    id TEXT NOT NULL,
    conversation TEXT NOT NULL,
    -- waiting: to be sent at due_at; sent: on the queue, lease until due_at; claimed: a courier works on it, lease until due_at
    state TEXT NOT NULL,
    due_at INTEGER NOT NULL,
    leases INTEGER NOT NULL DEFAULT 0,
    claims INTEGER NOT NULL DEFAULT 0,
    retries INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (kind, id)
  );
  CREATE INDEX effects_due ON effects (due_at);
`;

/** A streamed reply's message: what it shows, as its courier last reported (runtime/courier/reply-stream.ts). */
export const MESSAGE_REFS_SHOWN = `ALTER TABLE message_refs ADD COLUMN shown TEXT;`;

/**
 * Effects carry their work (runtime/effects/effects.ts): how often each was
 * sent, and since when. Chat messages go out in runs (runtime/effects/outbox.ts):
 * the run that carried a row while its outcome is not known.
 */
export const EFFECTS_WORK_OUTBOX_RUNS = `
  ALTER TABLE effects ADD COLUMN attempts INTEGER NOT NULL DEFAULT 0;
  ALTER TABLE effects ADD COLUMN first_sent_at INTEGER;
  ALTER TABLE outbox ADD COLUMN run INTEGER;
  CREATE INDEX outbox_runs ON outbox (run) WHERE run IS NOT NULL;
`;

/** The outbox's pacing reads the conversation's last update without scanning every message it ever sent. */
export const OUTBOX_UPDATES_INDEX = `CREATE INDEX outbox_updates_sent ON outbox (conversation, sent_at) WHERE status = 'sent' AND ref_key IS NOT NULL;`;

/** An answer in its status message's place (Outbox.answerInStatus) finds the status's first row without scanning the conversation's. */
export const OUTBOX_REFS_INDEX = `CREATE INDEX outbox_by_ref ON outbox (conversation, ref_key, id) WHERE ref_key IS NOT NULL;`;

/** Retention (runtime/store/archive.ts): settled sends leave by age. */
export const OUTBOX_SETTLED_INDEX = `
  CREATE INDEX outbox_settled ON outbox (created_at) WHERE status != 'pending';
`;

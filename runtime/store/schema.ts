// The object's SQLite schema, run by lib/migrations.ts: the applied count is
// kept in `meta.schema_version`, so an object created by an older deploy is
// brought forward the first time a newer one wakes it.
import { type Migration, runMigrations, schemaVersion } from "../../lib/migrations.ts";

/**
 * Append-only: objects in the field hold the count of these they applied, so
 * a released entry is never edited, reordered or removed; a schema change is a
 * new entry at the end (docs/design.md, "Migrations"). `meta` (identity,
 * settings, the version) is the runner's own table.
 */
const MIGRATIONS: readonly Migration[] = [
  {
    name: "conversations, log, jobs, tool calls, outbox, holds, effects",
    sql: `
  -- Every inbound event id ever accepted: platform retries stop here.
  CREATE TABLE inbound (event_id TEXT PRIMARY KEY, conversation TEXT NOT NULL, kind TEXT NOT NULL, at INTEGER NOT NULL);

  -- The append-only log a conversation is folded from (messages and turn marks).
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

  -- A projection of the log kept in the same transaction, for cheap lookups.
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

  -- Person messages waiting for the running turn's next model call (steering),
  -- and runtime notes (a decided hold) for the same moment.
  CREATE TABLE inbox (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    conversation TEXT NOT NULL,
    type TEXT NOT NULL,
    data TEXT NOT NULL,
    at INTEGER NOT NULL
  );
  CREATE INDEX inbox_by_conversation ON inbox (conversation, seq);

  CREATE TABLE model_jobs (
    id TEXT PRIMARY KEY,
    conversation TEXT NOT NULL,
    turn INTEGER NOT NULL,
    purpose TEXT NOT NULL,
    status TEXT NOT NULL,
    request TEXT,
    large_key TEXT,
    error TEXT,
    created_at INTEGER NOT NULL,
    settled_at INTEGER,
    -- What the call used (runtime/metering/usage.ts), set when its reply arrives.
    model TEXT,
    input_tokens INTEGER NOT NULL DEFAULT 0,
    cache_read_tokens INTEGER NOT NULL DEFAULT 0,
    cache_write_tokens INTEGER NOT NULL DEFAULT 0,
    output_tokens INTEGER NOT NULL DEFAULT 0,
    cost REAL NOT NULL DEFAULT 0
  );
  CREATE INDEX model_jobs_by_conversation ON model_jobs (conversation, status);
  CREATE INDEX model_jobs_settled ON model_jobs (settled_at) WHERE status != 'pending';

  -- One row per tool call, written before the call: replay after an eviction reads it.
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

  -- Chat messages to send, written with the state that produced them.
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

  -- The platform reference of a message updated in place (a turn's status, a card).
  CREATE TABLE message_refs (ref_key TEXT PRIMARY KEY, ref TEXT NOT NULL);

  -- Per-mount plugin session state.
  CREATE TABLE mount_sessions (alias TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL, PRIMARY KEY (alias, key));

  -- Calls held for a person's decision (approvals/holds.ts).
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

  -- What must happen off the object, next to the row it belongs to (runtime/effects/effects.ts).
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
  `,
  },
  {
    // Object busy time per turn and per hour (runtime/metering/busy-time.ts).
    name: "busy time",
    sql: `
  CREATE TABLE busy_turns (
    conversation TEXT NOT NULL,
    turn INTEGER NOT NULL,
    busy_ms REAL NOT NULL,
    handlers INTEGER NOT NULL,
    at INTEGER NOT NULL,
    PRIMARY KEY (conversation, turn)
  );
  -- shipped_ms: how much of the hour was handed to a courier for the ledger.
  CREATE TABLE busy_hours (hour INTEGER PRIMARY KEY, busy_ms REAL NOT NULL, passes INTEGER NOT NULL, handlers INTEGER NOT NULL, shipped_ms REAL NOT NULL DEFAULT 0);
  `,
  },
  // A streamed reply's message: what it shows, as its courier last reported (runtime/courier/reply-stream.ts).
  { name: "streamed reply shown", sql: `ALTER TABLE message_refs ADD COLUMN shown TEXT;` },
  {
    // Effects carry their work (runtime/effects/effects.ts): how often each was sent, and since when.
    name: "effects carry work, outbox runs",
    sql: `
  ALTER TABLE effects ADD COLUMN attempts INTEGER NOT NULL DEFAULT 0;
  ALTER TABLE effects ADD COLUMN first_sent_at INTEGER;
  -- Chat messages go out in runs (runtime/effects/outbox.ts): the run that carried a row while its outcome is not known.
  ALTER TABLE outbox ADD COLUMN run INTEGER;
  CREATE INDEX outbox_runs ON outbox (run) WHERE run IS NOT NULL;
  `,
  },
  // The outbox's pacing reads the conversation's last update without scanning every message it ever sent.
  { name: "outbox updates index", sql: `CREATE INDEX outbox_updates_sent ON outbox (conversation, sent_at) WHERE status = 'sent' AND ref_key IS NOT NULL;` },
  // The object's busy time that served no turn, per hour and part (runtime/metering/busy-time.ts):
  // with busy_turns it adds up to busy_hours.
  { name: "busy outside turns", sql: `CREATE TABLE busy_outside (hour INTEGER NOT NULL, part TEXT NOT NULL, busy_ms REAL NOT NULL, PRIMARY KEY (hour, part));` },
  {
    // A job waiting out its provider's rate limit: since when, and whether its turn told the person (runtime/models/jobs.ts).
    name: "model rate limits",
    sql: `
  ALTER TABLE model_jobs ADD COLUMN limited_since INTEGER;
  ALTER TABLE model_jobs ADD COLUMN busy_told INTEGER NOT NULL DEFAULT 0;
  `,
  },
  {
    // What a leased mount (a machine) holds per conversation, and when it ends (runtime/tools/leases.ts).
    // mount: as last used, so an unmounted one still ends; state: open, or ending (its effect under way).
    name: "machine leases",
    sql: `
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
  `,
  },
  {
    // Retention (runtime/store/archive.ts): a conversation archived to R2 keeps only its row, marked when;
    // the slices find the next ones without walking the archived, and old inbound ids, sends and tool calls leave by age.
    name: "retention",
    sql: `
  ALTER TABLE conversations ADD COLUMN archived_at INTEGER;
  CREATE INDEX conversations_unarchived ON conversations (updated_at) WHERE archived_at IS NULL;
  CREATE INDEX inbound_at ON inbound (at);
  CREATE INDEX outbox_settled ON outbox (created_at) WHERE status != 'pending';
  CREATE INDEX tool_calls_by_conversation ON tool_calls (conversation);
  CREATE INDEX tool_calls_done ON tool_calls (done_at) WHERE status = 'done';
  CREATE INDEX holds_by_conversation ON holds (conversation);
  `,
  },
  {
    // What a follower of a conversation sees, in order (runtime/feed): one row per log row and per state a
    // hold enters, written by triggers in the transaction that writes what it reports, so its seq is a durable,
    // monotonic event id. UNIQUE keeps a row put back from an archive (runtime/store/archive.ts) from being reported twice.
    // responses: the OpenAI Responses API's calls (runtime/feed/responses.ts), each waiting for one turn.
    name: "feed and responses",
    sql: `
  CREATE TABLE feed (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    conversation TEXT NOT NULL,
    log_seq INTEGER UNIQUE,
    hold_id TEXT,
    hold_state TEXT,
    UNIQUE (hold_id, hold_state)
  );
  CREATE INDEX feed_by_conversation ON feed (conversation, seq);
  CREATE TRIGGER feed_log AFTER INSERT ON log BEGIN
    INSERT OR IGNORE INTO feed (conversation, log_seq) VALUES (NEW.conversation, NEW.seq);
  END;
  CREATE TRIGGER feed_hold AFTER INSERT ON holds BEGIN
    INSERT OR IGNORE INTO feed (conversation, hold_id, hold_state) VALUES (NEW.conversation, NEW.id, NEW.status);
  END;
  CREATE TRIGGER feed_hold_state AFTER UPDATE OF status ON holds WHEN NEW.status != OLD.status BEGIN
    INSERT OR IGNORE INTO feed (conversation, hold_id, hold_state) VALUES (NEW.conversation, NEW.id, NEW.status);
  END;
  CREATE TABLE responses (
    id TEXT PRIMARY KEY,
    conversation TEXT NOT NULL,
    turn INTEGER NOT NULL,
    after_seq INTEGER NOT NULL,
    request TEXT NOT NULL,
    created_at INTEGER NOT NULL
  );
  `,
  },
  {
    // Subagents (runtime/turns/delegation.ts): a parent's `delegate` call (its tool_calls key) and the child run that answers it.
    // conversation: the parent's; state: queued (waiting for a slot), running, or answered (the call has its result);
    // turn_ms: the child's turn limit as configured when it was asked for, deadline: when a running one is stopped.
    name: "delegations",
    sql: `
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
  `,
  },
  {
    // A person's change made from a chat, waiting for its audit effect to append it to the control plane (runtime/object/audit-outbox.ts).
    name: "audit outbox",
    sql: `CREATE TABLE audit_outbox (id TEXT PRIMARY KEY, conversation TEXT NOT NULL, entry TEXT NOT NULL, created_at INTEGER NOT NULL);`,
  },
];

/** Whether the object was ever written (reading sqlite_master writes nothing). */
export function hasSchema(storage: DurableObjectStorage): boolean {
  return schemaVersion(storage.sql) > 0;
}

/** Brings the object's schema to this deploy's; throws MigrationError (all rolled back) when a migration fails. */
export function migrate(storage: DurableObjectStorage): void {
  runMigrations(storage, MIGRATIONS);
}

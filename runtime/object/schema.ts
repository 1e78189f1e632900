// The agent object's SQLite schema, run by lib/migrations.ts: the applied
// count is kept in `meta.schema_version`, so an object created by an older
// deploy is brought forward the first time a newer one wakes it. Each table's
// statements live in the room that owns it (and alone queries it); the list
// that orders them lives here, above every owner.
import { type Migration, runMigrations } from "../../lib/migrations.ts";
import { HOLDS_BY_CONVERSATION_INDEX, HOLDS_TABLE } from "../../approvals/index.ts";
import { CONVERSATIONS_ARCHIVED, CONVERSATIONS_TABLE, INBOUND_TABLE, INBOX_TABLE, LOG_TABLE } from "../store/index.ts";
import { BUSY_OUTSIDE_TABLE, BUSY_TIME_TABLES } from "../metering/index.ts";
import { EFFECTS_TABLE, EFFECTS_WORK_OUTBOX_RUNS, MESSAGE_REFS_SHOWN, MESSAGE_REFS_TABLE, OUTBOX_REFS_INDEX, OUTBOX_SETTLED_INDEX, OUTBOX_TABLE, OUTBOX_UPDATES_INDEX } from "../effects/index.ts";
import { MODEL_JOBS_RATE_LIMITS, MODEL_JOBS_TABLE } from "../models/index.ts";
import { LEASES_TABLE, MOUNT_SESSIONS_TABLE, TOOL_CALLS_RETENTION, TOOL_CALLS_TABLE } from "../tools/index.ts";
import { DELEGATIONS_TABLE } from "../turns/index.ts";
import { FEED_AND_RESPONSES_TABLES, RESPONSES_BY_TURN } from "../feed/index.ts";

/** A person's change made from a chat, waiting for its audit effect to append it to the control plane (runtime/object/audit-outbox.ts). */
const AUDIT_OUTBOX_TABLE = `CREATE TABLE audit_outbox (id TEXT PRIMARY KEY, conversation TEXT NOT NULL, entry TEXT NOT NULL, created_at INTEGER NOT NULL);`;

/**
 * Append-only: objects in the field hold the count of these they applied, so
 * a released entry is never edited, reordered or removed; a schema change is a
 * new entry at the end (docs/design.md, "Migrations"). `meta` (identity,
 * settings, the version) is the runner's own table.
 */
export const AGENT_MIGRATIONS: readonly Migration[] = [
  {
    name: "conversations, log, jobs, tool calls, outbox, holds, effects",
    sql: [
      INBOUND_TABLE,
      LOG_TABLE,
      CONVERSATIONS_TABLE,
      INBOX_TABLE,
      MODEL_JOBS_TABLE,
      TOOL_CALLS_TABLE,
      OUTBOX_TABLE,
      MESSAGE_REFS_TABLE,
      MOUNT_SESSIONS_TABLE,
      HOLDS_TABLE,
      EFFECTS_TABLE,
    ].join(""),
  },
  { name: "busy time", sql: BUSY_TIME_TABLES },
  { name: "streamed reply shown", sql: MESSAGE_REFS_SHOWN },
  { name: "effects carry work, outbox runs", sql: EFFECTS_WORK_OUTBOX_RUNS },
  { name: "outbox updates index", sql: OUTBOX_UPDATES_INDEX },
  { name: "busy outside turns", sql: BUSY_OUTSIDE_TABLE },
  { name: "model rate limits", sql: MODEL_JOBS_RATE_LIMITS },
  { name: "machine leases", sql: LEASES_TABLE },
  { name: "retention", sql: [CONVERSATIONS_ARCHIVED, OUTBOX_SETTLED_INDEX, TOOL_CALLS_RETENTION, HOLDS_BY_CONVERSATION_INDEX].join("") },
  { name: "feed and responses", sql: FEED_AND_RESPONSES_TABLES },
  { name: "delegations", sql: DELEGATIONS_TABLE },
  { name: "audit outbox", sql: AUDIT_OUTBOX_TABLE },
  { name: "outbox refs index", sql: OUTBOX_REFS_INDEX },
  { name: "responses by turn", sql: RESPONSES_BY_TURN },
];

/** Brings the object's schema to this deploy's; throws MigrationError (all rolled back) when a migration fails. */
export function migrate(storage: DurableObjectStorage): void {
  runMigrations(storage, AGENT_MIGRATIONS);
}

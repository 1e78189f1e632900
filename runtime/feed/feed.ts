// A conversation's events in order, for whoever follows it (the Agents API's
// Server-Sent Events, the Responses API's stream): one per row of the `feed`
// table, which triggers write in the transaction that writes what each reports
// (runtime/feed/schema.ts). Its seq is the event's id:
// durable and monotonic, so "events after N" resumes a follower exactly.
import { cardFor, type Card, type HoldRow, Holds } from "../../approvals/index.ts";
import { ConversationRows } from "../../lib/conversation-rows.ts";
import type { Route } from "../chat.ts";
import { type AwaitingData, type LogRow, logRowsAt, transcript, type TranscriptEntry } from "../store/index.ts";
import type { TurnOutcome } from "../turns/index.ts";

/**
 * `message`: a person's message, the agent's (with the tool calls it makes), a
 * runtime note or a compaction; `tool_result`: what a tool call answered;
 * `hold`: a call held for a decision, and each state it enters; `status`: a
 * turn started; `awaiting`: the turn waits for the Responses API caller's
 * output of its function calls `calls` (their ids); `done`: a turn ended.
 */
export type FeedEvent = { id: number; at: number } & (
  | { type: "message"; turn: number; entry: Exclude<TranscriptEntry, { role: "tool" }> }
  | { type: "tool_result"; turn: number; entry: Extract<TranscriptEntry, { role: "tool" }> }
  | { type: "hold"; card: Card }
  | { type: "status"; turn: number; status: "running" }
  | { type: "awaiting"; turn: number; calls: string[] }
  | { type: "done"; turn: number; outcome: TurnOutcome; error: string | null }
);

export interface FeedPage {
  events: FeedEvent[];
  /** The id to ask after next: past rows that show nothing (a standing document), so they are not read again. */
  last: number;
  /** The page was full: there may be more after `last` now. */
  more: boolean;
}

/** Rows read per page: a follower asks again at once while a page is full. */
const FEED_PAGE = 200;

type FeedRow = { seq: number; log_seq: number | null; hold_id: string | null; hold_state: string | null };

/** The feed of one conversation, as retention archives it (runtime/store/archive.ts). */
export function feedRows(sql: SqlStorage): ConversationRows<"feed"> {
  return new ConversationRows(sql, "feed");
}

/** The feed's newest id for the conversation (0 before its first event). */
export function feedEnd(sql: SqlStorage, conversation: string): number {
  return sql.exec<{ seq: number | null }>("SELECT MAX(seq) AS seq FROM feed WHERE conversation = ?", conversation).one().seq ?? 0;
}

/** The feed's newest id over every conversation (0 before the first event): a follower told up to it has heard everything. */
export function feedLast(sql: SqlStorage): number {
  return sql.exec<{ seq: number | null }>("SELECT MAX(seq) AS seq FROM feed").one().seq ?? 0;
}

/** The conversation's events after id `after`, oldest first, at most `limit`. */
export function feedAfter(sql: SqlStorage, route: Route, conversation: string, after: number, limit = FEED_PAGE): FeedPage {
  const rows = sql
    .exec<FeedRow>("SELECT seq, log_seq, hold_id, hold_state FROM feed WHERE conversation = ? AND seq > ? ORDER BY seq LIMIT ?", conversation, after, limit)
    .toArray();
  // What each row reports, asked of the rooms that own it: the store's log, approvals' holds.
  const logged = logRowsAt(sql, rows.flatMap((row) => (row.log_seq === null ? [] : [row.log_seq])));
  const holds = new Map(new Holds(sql).withIds([...new Set(rows.flatMap((row) => (row.hold_id ? [row.hold_id] : [])))]).map((hold) => [hold.id, hold]));
  const events = rows.flatMap((row) => {
    const hold = row.hold_id ? holds.get(row.hold_id) : undefined;
    if (hold) return [holdEvent(row.seq, route, hold, row.hold_state as HoldRow["status"])];
    const log = row.log_seq === null ? undefined : logged.get(row.log_seq);
    return log ? logEvent(row.seq, log) : [];
  });
  return { events, last: rows.at(-1)?.seq ?? after, more: rows.length === limit };
}

/** The card as it stood when the hold entered `state` (what was decided and done since is the hold's now). */
function holdEvent(id: number, route: Route, hold: HoldRow, state: HoldRow["status"]): FeedEvent {
  const card = cardFor({ ...hold, status: state }, route.tenant, route.agent);
  return { id, at: state === "pending" ? hold.created_at : (hold.decided_at ?? hold.created_at), type: "hold", card };
}

function logEvent(id: number, row: LogRow): FeedEvent[] {
  if (row.type === "turn_start") return [{ id, at: row.at, type: "status", turn: row.turn, status: "running" }];
  if (row.type === "awaiting") return [{ id, at: row.at, type: "awaiting", turn: row.turn, calls: (JSON.parse(row.data) as AwaitingData).calls }];
  if (row.type === "turn_end") {
    const end = JSON.parse(row.data) as { outcome: TurnOutcome; error?: string };
    return [{ id, at: row.at, type: "done", turn: row.turn, outcome: end.outcome, error: end.error ?? null }];
  }
  // One row's view, as the transcript shows it (rows it does not show, such as a standing document, show nothing here either).
  return transcript([row]).map((entry) =>
    entry.role === "tool" ? { id, at: row.at, type: "tool_result", turn: row.turn, entry } : { id, at: row.at, type: "message", turn: row.turn, entry },
  );
}

// Reads of one agent's SQLite for people watching it (the console): conversations
// newest first, paged and searched; pending approvals; and a cheap mark that
// changes whenever anything a watcher sees has changed. Plain functions over
// the object's SqlStorage; the AgentObject exposes them as thin RPC methods.
import { clip } from "../../lib/text.ts";
import { cardFor, type Card, type HoldRow } from "../../approvals/index.ts";
import type { ConversationStatus, Route } from "../chat.ts";
import { type ConversationRow, textOf, type UserData } from "../store/index.ts";

/** What a person is shown: the runtime's status, and "waiting_approval" for a conversation idle behind a pending hold. */
export type ConversationState = ConversationStatus | "waiting_approval";

/**
 * A running turn shows what it waits on; otherwise a pending hold is what the
 * conversation waits for (its turn has ended, and a decision wakes it again).
 */
export function conversationState(status: ConversationStatus, pendingHolds: number): ConversationState {
  if (status === "running" || status === "waiting_model") return status;
  return pendingHolds > 0 ? "waiting_approval" : status;
}

export interface ConversationSummary {
  id: string;
  state: ConversationState;
  turn: number;
  /** Who sent the first message (a name where the platform gave one). */
  startedBy: string;
  /** The first message, cut short. */
  preview: string;
  error: string | null;
  usage: { inputTokens: number; outputTokens: number; cost: number };
  createdAt: number;
  updatedAt: number;
}

/** Where the next page starts: the last row of this one (updated_at, then id, both descending). */
export interface PageCursor {
  updatedAt: number;
  id: string;
}

export interface ConversationQuery {
  /** Matches the conversation id or the text of its messages (case-insensitive for ASCII). */
  search?: string;
  after?: PageCursor;
  limit: number;
}

export interface ConversationPage {
  conversations: ConversationSummary[];
  /** Present when there is a further page. */
  next?: PageCursor;
}

const PREVIEW_CHARS = 140;
/** Log rows whose data holds words a person or the agent wrote. */
const TEXT_ROWS = "('user', 'assistant', 'tool_result')";

type SummaryRow = ConversationRow & {
  open_jobs: number;
  pending_holds: number;
  first_message: string | null;
};

/** LIKE with the user's text taken literally. */
function likePattern(text: string): string {
  return `%${text.replace(/[\\%_]/g, (ch) => `\\${ch}`)}%`;
}

export function conversationPage(sql: SqlStorage, query: ConversationQuery): ConversationPage {
  const where: string[] = [];
  const args: SqlStorageValue[] = [];
  if (query.search) {
    // Message rows are JSON; the pattern is matched against it, which is close enough for finding a conversation.
    where.push(`(c.id LIKE ? ESCAPE '\\' OR EXISTS (SELECT 1 FROM log l WHERE l.conversation = c.id AND l.type IN ${TEXT_ROWS} AND l.data LIKE ? ESCAPE '\\'))`);
    args.push(likePattern(query.search), likePattern(query.search));
  }
  if (query.after) {
    where.push("(c.updated_at < ? OR (c.updated_at = ? AND c.id < ?))");
    args.push(query.after.updatedAt, query.after.updatedAt, query.after.id);
  }
  const rows = sql
    .exec<SummaryRow>(
      `SELECT c.*,
        (SELECT COUNT(*) FROM model_jobs j WHERE j.conversation = c.id AND j.status = 'pending') AS open_jobs,
        (SELECT COUNT(*) FROM holds h WHERE h.conversation = c.id AND h.status = 'pending') AS pending_holds,
        (SELECT l.data FROM log l WHERE l.conversation = c.id AND l.type = 'user' ORDER BY l.seq LIMIT 1) AS first_message
      FROM conversations c ${where.length ? `WHERE ${where.join(" AND ")}` : ""}
      ORDER BY c.updated_at DESC, c.id DESC LIMIT ?`,
      ...args,
      query.limit + 1,
    )
    .toArray();
  const shown = rows.slice(0, query.limit);
  const last = shown.at(-1);
  return {
    conversations: shown.map(summary),
    next: rows.length > query.limit && last ? { updatedAt: last.updated_at, id: last.id } : undefined,
  };
}

function summary(row: SummaryRow): ConversationSummary {
  const starter = JSON.parse(row.started_by) as { id: string; name?: string };
  const status: ConversationStatus = row.status === "running" && row.open_jobs > 0 ? "waiting_model" : row.status;
  return {
    id: row.id,
    state: conversationState(status, row.pending_holds),
    turn: row.turn,
    startedBy: starter.name ?? starter.id,
    preview: row.first_message ? clip(textOf((JSON.parse(row.first_message) as UserData).message.content).replace(/\s+/g, " ").trim(), PREVIEW_CHARS) : "",
    error: row.error,
    usage: { inputTokens: row.input_tokens, outputTokens: row.output_tokens, cost: row.cost },
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
}

export interface PendingApproval {
  route: Route;
  conversation: string;
  createdAt: number;
  card: Card;
}

/** Holds waiting for a decision, oldest first; with `shown`, only those it keeps. */
export function pendingApprovals(sql: SqlStorage, route: Route, shown: (hold: HoldRow) => boolean = () => true): PendingApproval[] {
  return sql
    .exec<HoldRow>("SELECT * FROM holds WHERE status = 'pending' ORDER BY created_at, id")
    .toArray()
    .filter(shown)
    .map((hold) => ({ route, conversation: hold.conversation, createdAt: hold.created_at, card: cardFor(hold, route.tenant, route.agent) }));
}

/**
 * A value that changes whenever what a watcher sees changes: a log row (a turn
 * starts or ends, a message, a note), a model job opened or settled (running
 * vs waiting for the model, which writes no log row), and a hold created,
 * decided or settled (a note about it waits in the inbox while a turn runs).
 * Scoped to one conversation or the whole agent; each part reads an index.
 */
export function changeMark(sql: SqlStorage, conversation?: string): string {
  const and = conversation === undefined ? "" : " AND conversation = ?";
  const args = conversation === undefined ? [] : [conversation];
  const value = (query: string) => String(sql.exec<{ v: SqlStorageValue }>(query, ...args).one().v ?? "");
  return [
    value(`SELECT MAX(seq) AS v FROM log WHERE 1${and}`),
    value(`SELECT COUNT(*) AS v FROM model_jobs WHERE status = 'pending'${and}`),
    // The open holds and their states: a decision or a settlement changes the list.
    value(`SELECT group_concat(id || ':' || status) AS v FROM (SELECT id, status FROM holds WHERE status IN ('pending', 'approved', 'running')${and} ORDER BY id)`),
  ].join("/");
}

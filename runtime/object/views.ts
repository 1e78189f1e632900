// Reads of one agent's SQLite for people watching it (the console): conversations
// newest first, paged and searched; pending approvals; and a cheap mark that
// changes whenever anything a watcher sees has changed. Plain functions that
// ask the rooms owning each table; the AgentObject exposes them as thin RPC methods.
import { clip } from "../../lib/text.ts";
import { cardFor, type Card, type HoldRow, type Holds } from "../../approvals/index.ts";
import type { ConversationStatus, Route } from "../chat.ts";
import type { ModelJobs } from "../models/index.ts";
import { type ConversationQuery, conversationRows, logMark, type PageCursor, type PageRow, textOf, type UserData } from "../store/index.ts";

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

export type { ConversationQuery, PageCursor } from "../store/index.ts";

export interface ConversationPage {
  conversations: ConversationSummary[];
  /** Present when there is a further page. */
  next?: PageCursor;
}

const PREVIEW_CHARS = 140;

/** The store's page, with what the rooms that own them say of each: whether it waits for the model, and its holds waiting for a decision. */
export function conversationPage(sql: SqlStorage, jobs: ModelJobs, holds: Holds, query: ConversationQuery): ConversationPage {
  const { rows, next } = conversationRows(sql, query);
  return { conversations: rows.map((row) => summary(row, jobs.isOpen(row.id), holds.pending(row.id).length)), next };
}

function summary(row: PageRow, waitsForModel: boolean, pendingHolds: number): ConversationSummary {
  const starter = JSON.parse(row.started_by) as { id: string; name?: string };
  const status: ConversationStatus = row.status === "running" && waitsForModel ? "waiting_model" : row.status;
  return {
    id: row.id,
    state: conversationState(status, pendingHolds),
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

/** Holds waiting for a decision, oldest first (then by id); with `shown`, only those it keeps. */
export function pendingApprovals(holds: Holds, route: Route, shown: (hold: HoldRow) => boolean = () => true): PendingApproval[] {
  return holds
    .pending()
    .sort((a, b) => a.created_at - b.created_at || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))
    .filter(shown)
    .map((hold) => ({ route, conversation: hold.conversation, createdAt: hold.created_at, card: cardFor(hold, route.tenant, route.agent) }));
}

/**
 * A value that changes whenever what a watcher sees changes: a log row (a turn
 * starts or ends, a message, a note), a model job opened or settled (running
 * vs waiting for the model, which writes no log row), and a hold created,
 * decided or settled (a note about it waits in the inbox while a turn runs).
 * Scoped to one conversation or the whole agent; each part, asked of the
 * room that owns it, reads an index.
 */
export function changeMark(sql: SqlStorage, jobs: ModelJobs, holds: Holds, conversation?: string): string {
  return [logMark(sql, conversation), String(jobs.openCount(conversation)), holds.openStates(conversation) ?? ""].join("/");
}

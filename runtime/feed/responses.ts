// The OpenAI Responses API's calls as the agent's object keeps them: each is
// the answer to one message, so it waits for the turn that message went to,
// and its output is that turn's events after it was made (feed.ts). Written
// in the transaction that accepts the message, so a response exists exactly
// when its message does; its status is read from the feed, never kept twice.
import type { ChatEvent, Route } from "../chat.ts";
import type { JobUsage } from "../models/index.ts";
import type { ConversationRow } from "../store/index.ts";
import { type FeedEvent, feedAfter, feedEnd } from "./feed.ts";

/** What the caller asked, kept to answer with (the Responses object echoes it). */
export interface ResponseRequest {
  model: string;
  background: boolean;
  previousResponseId: string | null;
  metadata: Record<string, string>;
}

/** What one create brings the agent: answers to held calls (decided first), then the person's message, if any. */
export interface ResponseEvents {
  decisions: Extract<ChatEvent, { kind: "decision" }>[];
  message?: Extract<ChatEvent, { kind: "message" }>;
}

/** A create the object refused, with nothing written: an answer to a held call that cannot decide it. */
export interface ResponseRefusal {
  refused: { status: 403 | 404 | 409; message: string };
}

export type ResponseStatus = "in_progress" | "completed" | "failed" | "cancelled";

export interface ResponseState {
  id: string;
  conversation: string;
  turn: number;
  createdAt: number;
  request: ResponseRequest;
  status: ResponseStatus;
  error: string | null;
  /** The turn's events after the response's message, up to its end when it has ended. */
  events: FeedEvent[];
  /** The turn's model calls so far. */
  usage: JobUsage;
  /** The last feed row read for it: a follow from here hears what comes next (runtime/responses/follow.ts). */
  seen: number;
}

type ResponseRow = { id: string; conversation: string; turn: number; after_seq: number; request: string; created_at: number };

/** A message to the conversation as it stands: while a turn runs it steers that turn (the response waits for it), whatever the agent's second-message strategy. */
export function responseMessage(conv: ConversationRow | undefined, event: Extract<ChatEvent, { kind: "message" }>): ChatEvent {
  return conv?.status === "running" ? { ...event, kind: "steer" } : event;
}

export class Responses {
  constructor(private readonly sql: SqlStorage) {}

  /** The feed's end before the message is accepted: the response's output comes after it. */
  mark(conversation: string): number {
    return feedEnd(this.sql, conversation);
  }

  /**
   * After its events were accepted, in their transaction: the turn it waits
   * for. A message's is the conversation's turn now (the one it started or
   * steers); answers to held calls alone wait for the turn that carries their
   * outcome on: the running one, else the next (a deny starts it at once, an
   * approval once the call was performed).
   */
  record(id: string, conv: ConversationRow, afterSeq: number, request: ResponseRequest, message: boolean): void {
    this.sql.exec(
      "INSERT INTO responses (id, conversation, turn, after_seq, request, created_at) VALUES (?, ?, ?, ?, ?, ?)",
      id,
      conv.id,
      message || conv.status === "running" ? conv.turn : conv.turn + 1,
      afterSeq,
      JSON.stringify(request),
      Date.now(),
    );
  }

  find(id: string): ResponseRow | undefined {
    return this.sql.exec<ResponseRow>("SELECT * FROM responses WHERE id = ?", id).toArray()[0];
  }

  /** The response as it stands: its turn's events so far, and how the turn ended once it has. */
  state(route: Route, row: ResponseRow, usage: JobUsage): ResponseState {
    const events: FeedEvent[] = [];
    let after = row.after_seq;
    for (;;) {
      const page = feedAfter(this.sql, route, row.conversation, after);
      for (const event of page.events) {
        // Rows of other turns (a note that waited, a hold decided from an earlier turn) are not this response's.
        if ("turn" in event && event.turn !== row.turn) continue;
        events.push(event);
        if (event.type === "done") return this.#shown(row, usage, events, event.id, event.outcome, event.error);
      }
      if (!page.more) return this.#shown(row, usage, events, page.last, null, null);
      after = page.last;
    }
  }

  #shown(
    row: ResponseRow,
    usage: JobUsage,
    events: FeedEvent[],
    seen: number,
    outcome: Extract<FeedEvent, { type: "done" }>["outcome"] | null,
    error: string | null,
  ): ResponseState {
    const status: ResponseStatus =
      outcome === null ? "in_progress" : outcome === "failed" ? "failed" : outcome === "stopped" || outcome === "restarted" ? "cancelled" : "completed";
    const request = JSON.parse(row.request) as ResponseRequest;
    return { id: row.id, conversation: row.conversation, turn: row.turn, createdAt: row.created_at, request, status, error, events, usage, seen };
  }
}

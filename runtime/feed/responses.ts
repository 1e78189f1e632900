// The OpenAI Responses API's calls as the agent's object keeps them: each is
// the answer to one message, so it waits for the turn that message went to,
// and its output is that turn's events after it was made (feed.ts). Written
// in the transaction that accepts the message, so a response exists exactly
// when its message does; its status is read from the feed, never kept twice.
// A response completes where its turn ends, or where the turn waits for the
// caller's output of a function tool the caller declared (kept with its
// request, and offered to the model for that turn).
import type { ChatEvent, ChatUser, Route } from "../chat.ts";
import type { JobUsage } from "../models/index.ts";
import type { ConversationRow } from "../store/index.ts";
import { type FeedEvent, feedAfter, feedEnd } from "./feed.ts";

/** What the caller asked, kept to answer with (the Responses object echoes it). */
export interface ResponseRequest {
  model: string;
  background: boolean;
  previousResponseId: string | null;
  metadata: Record<string, string>;
  /** The caller's function tools, offered to the model for the turn the response goes to. */
  tools?: FunctionTool[];
}

/** A function tool a caller declares (OpenAI's FunctionTool), as the model is offered it. */
export interface FunctionTool {
  name: string;
  description: string;
  /** A JSON schema (type "object"); its values typed loosely, as an RPC carries them (`unknown` is not serializable). */
  parameters: { [key: string]: object | string | number | boolean | null };
  strict: boolean;
}

/** What one create brings the agent, in `conversation` from `user`: answers to held calls (decided first), outputs of the caller's function calls, then the person's message, if any. */
export interface ResponseEvents {
  conversation: string;
  user: ChatUser;
  decisions: Extract<ChatEvent, { kind: "decision" }>[];
  outputs: { callId: string; output: string }[];
  message?: Extract<ChatEvent, { kind: "message" }>;
}

/** A create the object refused, with nothing written: an answer that cannot be given, a message while a function call waits, a tool named as one of the agent's. */
export interface ResponseRefusal {
  refused: { status: 400 | 403 | 404 | 409; message: string };
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

  /** The function tools the caller declared for `turn` of the conversation: its latest response's that declared any. */
  functionsOf(conversation: string, turn: number): FunctionTool[] {
    const row = this.sql
      .exec<{ tools: string }>(
        "SELECT json_extract(request, '$.tools') AS tools FROM responses WHERE conversation = ? AND turn = ? AND json_extract(request, '$.tools') IS NOT NULL ORDER BY created_at DESC, rowid DESC LIMIT 1",
        conversation,
        turn,
      )
      .toArray()[0];
    return row ? (JSON.parse(row.tools) as FunctionTool[]) : [];
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
        if (event.type === "done") return this.#shown(row, usage, events, event.id, statusOf(event.outcome), event.error);
        // The turn waits for the caller's function outputs: this response is answered (the next one carries the turn on).
        if (event.type === "awaiting") return this.#shown(row, usage, events, event.id, "completed", null);
      }
      if (!page.more) return this.#shown(row, usage, events, page.last, "in_progress", null);
      after = page.last;
    }
  }

  #shown(row: ResponseRow, usage: JobUsage, events: FeedEvent[], seen: number, status: ResponseStatus, error: string | null): ResponseState {
    const request = JSON.parse(row.request) as ResponseRequest;
    return { id: row.id, conversation: row.conversation, turn: row.turn, createdAt: row.created_at, request, status, error, events, usage, seen };
  }
}

function statusOf(outcome: Extract<FeedEvent, { type: "done" }>["outcome"]): ResponseStatus {
  return outcome === "failed" ? "failed" : outcome === "stopped" || outcome === "restarted" ? "cancelled" : "completed";
}

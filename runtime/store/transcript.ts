// The conversation log and its folds: the model's view and the person's view.
import type { AssistantMessage, Message, ToolResultMessage, UserMessage } from "@mariozechner/pi-ai";
import type { ChatUser } from "../chat.ts";

/**
 * `standing`: the standing documents put in the system prompt from here on
 * (until the next compaction); `compaction`: a compaction asked for by the
 * provider, started or failed (a handover is one that succeeded); `awaiting`:
 * the turn waits for the Responses API caller's output of its function calls
 * (AwaitingData).
 */
export type LogType = "turn_start" | "turn_end" | "user" | "assistant" | "tool_result" | "marker" | "handover" | "standing" | "compaction" | "awaiting";

export type LogRow = {
  seq: number;
  conversation: string;
  turn: number;
  type: LogType;
  data: string;
  at: number;
}

export interface UserData {
  message: UserMessage;
  by: ChatUser;
  steer: boolean;
}

export type TranscriptEntry =
  | { role: "user"; text: string; by: string; steer: boolean; at: number }
  /** Where a compaction happened: `summarised` earlier messages became the handover `text`, the last `kept` stayed as they were. */
  | { role: "compaction"; text: string; trigger: CompactionTrigger; summarised: number; kept: number; at: number }
  /** `calledAt`: when the model call that wrote it began (its reply's timestamp), which names the call its text was streamed from. */
  | { role: "assistant"; text: string; toolCalls: { id: string; name: string; arguments: unknown }[]; calledAt: number; at: number }
  | { role: "tool"; toolCallId: string; toolName: string; text: string; isError: boolean; at: number }
  | { role: "note"; text: string; at: number };

/** How the model is shown a note from the runtime (a decided hold, a stopped turn) among the person's messages. */
export const RUNTIME_NOTE_PREFIX = "[runtime note] ";

export function textOf(content: UserMessage["content"] | AssistantMessage["content"] | ToolResultMessage["content"]): string {
  if (typeof content === "string") return content;
  return content.map((c) => (c.type === "text" ? c.text : "")).join("");
}

/** The rows the model is shown (a note and a handover as user text). */
export const MESSAGE_TYPES: ReadonlySet<LogType> = new Set(["user", "assistant", "tool_result", "marker", "handover"]);

export function isMessageRow(row: LogRow): boolean {
  return MESSAGE_TYPES.has(row.type);
}

/** What made a compaction: a share of the context window, of the output budget, the provider, or a person. */
export type CompactionTrigger = "window" | "output" | "refused" | "person";

export interface HandoverData {
  summary: string;
  /** Rows from this seq on (the tail kept verbatim, and everything after) still follow it. */
  keepFrom?: number;
  trigger?: CompactionTrigger;
  summarised?: number;
  kept?: number;
}

export type CompactionData =
  /** The provider refused a request as too long for the model: one compaction is forced. */
  | { event: "refused"; error: string }
  /** A summary job was written for the messages before `keepFrom`. */
  | { event: "started"; trigger: CompactionTrigger; keepFrom: number; summarised: number; kept: number }
  /** The summary call failed: nothing changed. */
  | { event: "failed"; error: string };

/** The calls (their ids) of the assistant message before it that wait for the caller's function_call_output. */
export interface AwaitingData {
  calls: string[];
}

/** The lines of each mount's standing document, as the system prompt shows them from this row on. */
export interface StandingData {
  documents: Record<string, string[]>;
}

/** A runtime note; one that tells of a standing document's change carries the change, so it can be folded. */
export interface MarkerData {
  text: string;
  standing?: StandingChange;
}

export interface StandingChange {
  alias: string;
  added: string[];
  removed: string[];
}

/**
 * The message rows the model is shown, and the handover they follow: the last
 * handover replaces everything before its `keepFrom`; the rows from there on
 * (but no earlier handover) follow it.
 */
export function shownRows(rows: LogRow[]): { handover?: LogRow; rows: LogRow[] } {
  const at = rows.findLastIndex((row) => row.type === "handover");
  if (at < 0) return { rows: rows.filter(isMessageRow) };
  const handover = rows[at]!;
  const keepFrom = (JSON.parse(handover.data) as HandoverData).keepFrom ?? handover.seq;
  return { handover, rows: rows.filter((row) => row.seq >= keepFrom && row.type !== "handover" && isMessageRow(row)) };
}

/** What the model is shown, notes as user text: the last handover, then the rows it keeps, then everything since. */
export function modelMessages(rows: LogRow[]): Message[] {
  const { handover, rows: kept } = shownRows(rows);
  return (handover ? [handover, ...kept] : kept).map(messageOf);
}

/** One message row as the model sees it. */
export function messageOf(row: LogRow): Message {
  const data = JSON.parse(row.data);
  switch (row.type) {
    case "user":
      return (data as UserData).message;
    case "assistant":
      return data as AssistantMessage;
    case "tool_result":
      return data as ToolResultMessage;
    case "marker":
      return { role: "user", content: `${RUNTIME_NOTE_PREFIX}${(data as MarkerData).text}`, timestamp: row.at };
    case "handover":
      return { role: "user", content: `<handover>\n${(data as HandoverData).summary}\n</handover>`, timestamp: row.at };
    default:
      throw new Error(`log row ${row.seq} (${row.type}) is not a message`);
  }
}

/** What a person (or the Agents API) is shown. */
export function transcript(rows: LogRow[]): TranscriptEntry[] {
  const out: TranscriptEntry[] = [];
  for (const row of rows) {
    const data = JSON.parse(row.data);
    switch (row.type) {
      case "user": {
        const u = data as UserData;
        out.push({ role: "user", text: textOf(u.message.content), by: u.by.name ?? u.by.id, steer: u.steer, at: row.at });
        break;
      }
      case "assistant": {
        const a = data as AssistantMessage;
        const toolCalls = a.content.flatMap((c) => (c.type === "toolCall" ? [{ id: c.id, name: c.name, arguments: c.arguments }] : []));
        out.push({ role: "assistant", text: textOf(a.content), toolCalls, calledAt: a.timestamp, at: row.at });
        break;
      }
      case "tool_result": {
        const t = data as ToolResultMessage;
        out.push({ role: "tool", toolCallId: t.toolCallId, toolName: t.toolName, text: textOf(t.content), isError: t.isError, at: row.at });
        break;
      }
      case "marker":
        out.push({ role: "note", text: data.text, at: row.at });
        break;
      case "handover": {
        const h = data as HandoverData;
        out.push({ role: "compaction", text: h.summary, trigger: h.trigger ?? "person", summarised: h.summarised ?? 0, kept: h.kept ?? 0, at: row.at });
        break;
      }
      case "compaction": {
        const c = data as CompactionData;
        if (c.event === "refused") out.push({ role: "note", text: `The model provider refused the request as too long for the model (${c.error}).`, at: row.at });
        if (c.event === "failed") out.push({ role: "note", text: `Compaction failed (${c.error}); the conversation is as it was.`, at: row.at });
        break;
      }
    }
  }
  return out;
}

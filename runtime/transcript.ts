// The conversation log and its folds: the model's view and the person's view.
import type { AssistantMessage, Message, ToolResultMessage, UserMessage } from "@mariozechner/pi-ai";
import type { ChatUser } from "./chat.ts";

export type LogType = "turn_start" | "turn_end" | "user" | "assistant" | "tool_result" | "marker" | "handover";

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
  | { role: "assistant"; text: string; toolCalls: { id: string; name: string; arguments: unknown }[]; at: number }
  | { role: "tool"; toolCallId: string; toolName: string; text: string; isError: boolean; at: number }
  | { role: "note"; text: string; at: number };

/** How the model is shown a note from the runtime (a decided hold, a stopped turn) among the person's messages. */
export const RUNTIME_NOTE_PREFIX = "[runtime note] ";

export function textOf(content: UserMessage["content"] | AssistantMessage["content"] | ToolResultMessage["content"]): string {
  if (typeof content === "string") return content;
  return content.map((c) => (c.type === "text" ? c.text : "")).join("");
}

const MESSAGE_TYPES: ReadonlySet<LogType> = new Set(["user", "assistant", "tool_result", "marker", "handover"]);

export function isMessageRow(row: LogRow): boolean {
  return MESSAGE_TYPES.has(row.type);
}

export interface HandoverData {
  summary: string;
  /** Rows from this seq on (the turn the summary was made in) still follow it. */
  keepFrom?: number;
}

/**
 * What the model is shown, notes as user text. The last handover replaces
 * everything before it, except the rows it keeps, which follow the summary.
 */
export function modelMessages(rows: LogRow[]): Message[] {
  const at = rows.findLastIndex((row) => row.type === "handover");
  let shown = rows;
  if (at >= 0) {
    const handover = rows[at]!;
    const keepFrom = (JSON.parse(handover.data) as HandoverData).keepFrom ?? handover.seq;
    shown = [handover, ...rows.filter((row, i) => i !== at && row.seq >= keepFrom)];
  }
  const out: Message[] = [];
  for (const row of shown) {
    const data = JSON.parse(row.data);
    switch (row.type) {
      case "user":
        out.push((data as UserData).message);
        break;
      case "assistant":
        out.push(data as AssistantMessage);
        break;
      case "tool_result":
        out.push(data as ToolResultMessage);
        break;
      case "marker":
        out.push({ role: "user", content: `${RUNTIME_NOTE_PREFIX}${data.text}`, timestamp: row.at });
        break;
      case "handover":
        out.push({ role: "user", content: `<handover>\n${data.summary}\n</handover>`, timestamp: row.at });
        break;
    }
  }
  return out;
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
        out.push({ role: "assistant", text: textOf(a.content), toolCalls, at: row.at });
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
      case "handover":
        out.push({ role: "note", text: `Earlier messages were compacted into a summary:\n${data.summary}`, at: row.at });
        break;
    }
  }
  return out;
}

function clip(text: string, max: number): string {
  return text.length > max ? `${text.slice(0, max)}\n[… ${text.length - max} characters clipped]` : text;
}

/** The same messages with every text part cut to `max` characters. */
export function clipMessages(messages: Message[], max: number): Message[] {
  return messages.map((m): Message => {
    if (m.role === "user") {
      return { ...m, content: typeof m.content === "string" ? clip(m.content, max) : m.content.map((c) => (c.type === "text" ? { ...c, text: clip(c.text, max) } : c)) };
    }
    if (m.role === "toolResult") return { ...m, content: m.content.map((c) => (c.type === "text" ? { ...c, text: clip(c.text, max) } : c)) };
    return { ...m, content: m.content.map((c) => (c.type === "text" ? { ...c, text: clip(c.text, max) } : c)) };
  });
}

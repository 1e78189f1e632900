// The tool-call journal: one row per call, written before the call is made,
// so a call found "started" after an eviction is a replay (invariant 8).
import type { AssistantMessage, ToolCall, ToolResultMessage } from "@mariozechner/pi-ai";

export type ToolCallRecord = { status: "started" | "done"; result: string | null };

export class ToolJournal {
  constructor(private readonly sql: SqlStorage) {}

  get(key: string): ToolCallRecord | undefined {
    return this.sql.exec<ToolCallRecord>("SELECT status, result FROM tool_calls WHERE key = ?", key).toArray()[0];
  }

  /** The stored result of a finished call. */
  result(key: string): ToolResultMessage | undefined {
    const record = this.get(key);
    return record?.status === "done" ? (JSON.parse(record.result!) as ToolResultMessage) : undefined;
  }

  start(key: string, conversation: string, turn: number, name: string): void {
    this.sql.exec(
      "INSERT INTO tool_calls (key, conversation, turn, name, status, started_at) VALUES (?, ?, ?, ?, 'started', ?)",
      key,
      conversation,
      turn,
      name,
      Date.now(),
    );
  }

  finish(key: string, result: ToolResultMessage): void {
    this.sql.exec("UPDATE tool_calls SET status = 'done', result = ?, done_at = ? WHERE key = ?", JSON.stringify(result), Date.now(), key);
  }

  /** A call answered without being performed (held, or refused before it ran). */
  record(key: string, conversation: string, turn: number, name: string, result: ToolResultMessage): void {
    const now = Date.now();
    this.sql.exec(
      "INSERT INTO tool_calls (key, conversation, turn, name, status, result, started_at, done_at) VALUES (?, ?, ?, ?, 'done', ?, ?, ?)",
      key,
      conversation,
      turn,
      name,
      JSON.stringify(result),
      now,
      now,
    );
  }
}

/** Tool call ids may repeat across turns, so the key includes the assistant message's log position. */
export function toolCallKey(conversation: string, assistantSeq: number, call: ToolCall): string {
  return `${conversation}:${assistantSeq}:${call.id}`;
}

export function toolCalls(message: AssistantMessage): ToolCall[] {
  return message.content.filter((c): c is ToolCall => c.type === "toolCall");
}

export function toolResult(call: ToolCall, output: { text: string; isError?: boolean }): ToolResultMessage {
  return {
    role: "toolResult",
    toolCallId: call.id,
    toolName: call.name,
    content: [{ type: "text", text: output.text }],
    isError: output.isError === true,
    timestamp: Date.now(),
  };
}

// Compaction: a conversation's earlier messages summarised into a handover the
// model sees in their place. Asked for by a person (`compact`), or on the way
// when a request would fill most of the model's context window.
import type { ModelChoice, ModelPick } from "./models/index.ts";
import type { ModelRequest } from "./model-job.ts";
import { clipMessages, modelMessages, type HandoverData, type LogRow } from "./transcript.ts";

/** A request estimated above this share of the model's context window is compacted first. */
const COMPACT_AT = 0.75;
/** Each message's share of a summary request. */
const SUMMARY_MESSAGE_CHARS = 4_000;

/** Summarises the rows before `keepFrom` (all of them when compaction is the turn's purpose). */
export function compactionRequest(model: ModelPick, rows: LogRow[], keepFrom = Infinity): ModelRequest {
  const earlier = rows.filter((row) => row.seq < keepFrom);
  return {
    model,
    systemPrompt:
      "You write handover notes. Summarise the conversation so far so that another assistant can continue it: " +
      "the person's goals, decisions, facts learned, open questions and anything promised. Be complete but brief.",
    // Long messages are clipped, so the summary request itself fits when the conversation no longer does.
    messages: [...clipMessages(modelMessages(earlier), SUMMARY_MESSAGE_CHARS), { role: "user", content: "Write the handover summary now.", timestamp: Date.now() }],
    tools: [],
  };
}

/**
 * A chat request that would fill most of the context window is preceded by a
 * compaction of everything before the current turn: once per turn, and only
 * when there is something before it to summarise.
 */
export function needsCompaction(model: ModelChoice, requestChars: number, rows: LogRow[], keepFrom: number): boolean {
  if (requestChars / 4 < COMPACT_AT * model.settings.contextWindow) return false;
  const already = rows.some((row) => row.type === "handover" && (JSON.parse(row.data) as HandoverData).keepFrom === keepFrom);
  return !already && modelMessages(rows.filter((row) => row.seq < keepFrom)).length >= 2;
}

/** Whether a person's `compact` can start now, and if not, why. */
export function compactRefusal(status: "idle" | "running" | "failed", rows: LogRow[]): string | null {
  if (status === "running") return "A turn is running; stop it or wait for it before compacting.";
  if (modelMessages(rows).length < 2) return "Nothing to compact yet.";
  return null;
}

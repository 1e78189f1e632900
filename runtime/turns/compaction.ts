// Compaction: what the model is shown of a long conversation, made shorter.
// The newest messages (a tail, walked back from the newest to a token budget)
// stay verbatim; everything before them is summarised into a handover with
// fixed sections, which a later compaction merges into rather than appends
// to. The log keeps every message: only the model's view changes.
//
// Four triggers: a request estimated above a share of the context window;
// too little room left for a share of the output budget; the provider refusing
// a request as too long (one compaction, forced, then the call again); and a
// person's `compact`. A turn compacts at most once between two replies of the
// model (or its start and the first), plus once more when the provider refuses
// the result, so nothing loops.
import type { Message } from "@mariozechner/pi-ai";
import type { ModelPick, ModelSettings, ModelRequest } from "../models/index.ts";
import { clip } from "../../lib/text.ts";
import { isMessageRow, messageOf, shownRows, textOf, type CompactionData, type CompactionTrigger, type HandoverData, type LogRow } from "../store/index.ts";

/** A request estimated above this share of the context window is compacted first. */
const WINDOW_SHARE = 0.75;
/** … and so is one that leaves room for less than this share of the output budget (maxTokens). */
const OUTPUT_FREE_SHARE = 0.5;
/** The tail kept verbatim: at most this share of the window (and at most half of what the model is shown). */
const KEEP_SHARE = 0.25;
/** After the provider refused a request as too long, the estimate is not to be trusted: keep less. */
const KEEP_SHARE_REFUSED = 0.1;
/** The summariser is shown at most this share of the window of conversation. */
const SUMMARY_INPUT_SHARE = 0.5;
/** Tool output is cut hard for the summariser; other messages less so. */
const TOOL_CHARS = 400;
const MESSAGE_CHARS = 2_000;
const CHARS_PER_TOKEN = 4;
/**
 * An image is counted as this many tokens, not by the length of its base64
 * (a large image costs Claude about 1,600 tokens, GPT-4o at most about 1,100).
 */
const IMAGE_TOKENS = 1_600;

export const HANDOVER_SECTIONS = ["Goal", "Constraints", "Progress", "Decisions", "Open questions", "Next steps"] as const;

const HANDOVER_PROMPT =
  "You write handover notes. Another assistant will continue this conversation from your note alone, followed only by its latest messages. " +
  `Write the note in Markdown with exactly these sections, in this order, each under a "## " heading: ${HANDOVER_SECTIONS.join(", ")}. ` +
  'Use short bullet points; write "(none)" under a section with nothing in it. Keep names, numbers, identifiers, paths and promises exactly. ' +
  "Be brief: at most 600 words in all. Write only the note.";

const MERGE_INSTRUCTION =
  "Below is the handover note written at the previous compaction, then the messages that came after it. " +
  "Merge the new messages into that note: update each section in place, keep what is still true, drop what is settled or no longer true. " +
  "Return one note with the same sections; do not append a second note after the first.";

const tokens = (chars: number) => Math.ceil(chars / CHARS_PER_TOKEN);

/** What the model is shown of one message row, in characters. */
const shownChars = (row: LogRow) => {
  const content = messageOf(row).content;
  return JSON.stringify(content).length + imageAllowance(typeof content === "string" ? [] : content);
};

/** What images change in a length in characters: their base64 out, IMAGE_TOKENS each in. */
type Part = { type: string; data?: string };

function imageAllowance(content: readonly Part[]): number {
  return content.reduce((sum, part) => sum + (part.type === "image" ? IMAGE_TOKENS * CHARS_PER_TOKEN - (part.data?.length ?? 0) : 0), 0);
}

/** A request's length in characters as the estimate counts it (images as IMAGE_TOKENS each). */
export function requestChars(body: string, messages: Message[]): number {
  return body.length + imageAllowance(messages.flatMap((m): readonly Part[] => (typeof m.content === "string" ? [] : m.content)));
}

/**
 * A request's size in tokens: characters / 4, or, when larger, what the
 * provider counted for the last reply since the last compaction plus the
 * messages after it (text heavy in digits or code counts more per character).
 */
export function estimateTokens(requestChars: number, rows: LogRow[]): number {
  const handover = rows.findLast((row) => row.type === "handover")?.seq ?? 0;
  const at = rows.findLastIndex((row) => row.type === "assistant" && row.seq > handover);
  if (at < 0) return tokens(requestChars);
  const { usage } = JSON.parse(rows[at]!.data) as { usage: { input: number; output: number; cacheRead: number; cacheWrite: number } };
  const newer = rows.slice(at + 1).filter(isMessageRow);
  const counted = usage.input + usage.cacheRead + usage.cacheWrite + usage.output + tokens(newer.reduce((sum, row) => sum + shownChars(row), 0));
  return Math.max(tokens(requestChars), counted);
}

/** The rows since the model last answered or the turn started, whichever is later. */
function sinceReply(rows: LogRow[]): LogRow[] {
  return rows.slice(rows.findLastIndex((row) => row.type === "assistant" || row.type === "turn_start") + 1);
}

/** The last compaction event since the model last answered (or the turn started): a refusal, a start, a failure or a handover. */
function lastCompactionEvent(rows: LogRow[]): CompactionData | { event: "handover" } | undefined {
  const row = sinceReply(rows).findLast((r) => r.type === "compaction" || r.type === "handover");
  if (!row) return undefined;
  return row.type === "handover" ? { event: "handover" } : (JSON.parse(row.data) as CompactionData);
}

/**
 * Whether the next chat request must be compacted first, and why: the
 * provider refused the last one as too long, or it is estimated too large.
 * Not again once a compaction was tried since the model last answered (or the turn started).
 */
export function compactionTrigger(settings: ModelSettings, estimate: number, rows: LogRow[]): CompactionTrigger | null {
  const last = lastCompactionEvent(rows);
  if (last?.event === "refused") return "refused";
  if (last) return null;
  if (estimate >= WINDOW_SHARE * settings.contextWindow) return "window";
  if (settings.contextWindow - estimate < OUTPUT_FREE_SHARE * settings.maxTokens) return "output";
  return null;
}

/** Whether the provider already refused a request as too long since the model last answered or the turn started (a forced compaction did not help). */
export function refusedAgain(rows: LogRow[]): boolean {
  return sinceReply(rows).some((row) => row.type === "compaction" && (JSON.parse(row.data) as CompactionData).event === "refused");
}

/** The compaction under way: the last one started. */
export function startedCompaction(rows: LogRow[]): Extract<CompactionData, { event: "started" }> | undefined {
  const events = rows.filter((row) => row.type === "compaction").map((row) => JSON.parse(row.data) as CompactionData);
  return events.findLast((data) => data.event === "started");
}

export interface CompactionPlan {
  trigger: CompactionTrigger;
  /** The first log row kept verbatim (after the last row when none is). */
  keepFrom: number;
  /** The message rows to summarise, oldest first (none of them a handover). */
  earlier: LogRow[];
  kept: number;
  /** The summary these rows are merged into. */
  previous: string | null;
}

/**
 * Walks back from the newest message the model is shown to the token budget:
 * that tail is kept; everything before it is summarised. The tail never starts
 * with a tool result (its call stays with it). Null when nothing would be summarised.
 */
export function planCompaction(settings: Pick<ModelSettings, "contextWindow">, rows: LogRow[], trigger: CompactionTrigger): CompactionPlan | null {
  const { handover, rows: shown } = shownRows(rows);
  if (shown.length < 2) return null; // one message alone is not summarised away
  const sizes = shown.map((row) => tokens(shownChars(row)));
  const share = trigger === "refused" ? KEEP_SHARE_REFUSED : KEEP_SHARE;
  const budget = Math.min(share * settings.contextWindow, sizes.reduce((a, b) => a + b, 0) / 2);
  let cut = shown.length;
  for (let i = shown.length - 1, size = 0; i >= 0; i--) {
    size += sizes[i]!;
    if (size > budget) break;
    if (shown[i]!.type !== "tool_result") cut = i;
  }
  if (cut === 0) return null;
  return {
    trigger,
    keepFrom: shown[cut]?.seq ?? rows.at(-1)!.seq + 1,
    earlier: shown.slice(0, cut),
    kept: shown.length - cut,
    previous: handover ? (JSON.parse(handover.data) as HandoverData).summary : null,
  };
}

/** Cut hard for the summariser, saying how much was cut. */
function cutForSummary(text: string, max: number): string {
  const kept = clip(text, max, "");
  return kept === text ? text : `${kept} [… ${text.length - kept.length} characters cut]`;
}

/** One message as a line of the transcript the summariser reads; tool output cut hard. */
function transcriptLine(row: LogRow): string {
  const message = messageOf(row);
  switch (message.role) {
    case "user":
      return `[${row.type === "marker" ? "runtime note" : "person"}] ${cutForSummary(textOf(message.content), MESSAGE_CHARS)}`;
    case "toolResult":
      return `[tool result ${message.toolName}${message.isError ? ", error" : ""}] ${cutForSummary(textOf(message.content), TOOL_CHARS)}`;
    case "assistant": {
      const text = textOf(message.content);
      const calls = message.content.flatMap((c) => (c.type === "toolCall" ? [`[assistant calls ${c.name}] ${cutForSummary(JSON.stringify(c.arguments), TOOL_CHARS)}`] : []));
      return [...(text ? [`[assistant] ${cutForSummary(text, MESSAGE_CHARS)}`] : []), ...calls].join("\n");
    }
  }
}

/**
 * The conversation as the summariser reads it, within `budget` characters:
 * past it, the first message and the newest ones are kept, and the middle is
 * named by a marker (the first usually says what the person wants).
 */
function transcriptText(rows: LogRow[], budget: number): string {
  const lines = rows.map(transcriptLine);
  const total = lines.reduce((sum, line) => sum + line.length + 1, 0);
  if (total <= budget) return lines.join("\n");
  const first = lines[0]!;
  let used = first.length + 80;
  let from = lines.length;
  while (from > 1 && used + lines[from - 1]!.length + 1 <= budget) used += lines[--from]!.length + 1;
  return [first, `[… ${from - 1} messages left out here to fit …]`, ...lines.slice(from)].join("\n");
}

/** The summary request: the earlier messages as one transcript, and the previous handover to merge into. */
export function compactionRequest(pick: ModelPick, settings: Pick<ModelSettings, "contextWindow">, plan: CompactionPlan): ModelRequest {
  const budget = SUMMARY_INPUT_SHARE * settings.contextWindow * CHARS_PER_TOKEN - (plan.previous?.length ?? 0);
  const conversation = `<conversation>\n${transcriptText(plan.earlier, budget)}\n</conversation>`;
  const content = plan.previous
    ? `${MERGE_INSTRUCTION}\n\n<previous-handover>\n${plan.previous}\n</previous-handover>\n\n${conversation}\n\nWrite the merged handover note now.`
    : `The conversation so far (tool output is cut short):\n\n${conversation}\n\nWrite the handover note now.`;
  return { model: pick, systemPrompt: HANDOVER_PROMPT, messages: [{ role: "user", content, timestamp: Date.now() }], tools: [] };
}

const SECTION_HEADING = new RegExp(`^\\s*(?:#{1,6}\\s*)?(?:\\*\\*)?(${HANDOVER_SECTIONS.join("|")})(?:\\*\\*)?\\s*:?\\s*(?:\\*\\*)?\\s*$`, "i");

/** A handover's sections by name (text under headings it does not know stays with the section before). */
function sectionsOf(text: string): Map<string, string> {
  const found = new Map<string, string[]>();
  let current: string[] | null = null;
  for (const line of text.split("\n")) {
    const heading = SECTION_HEADING.exec(line);
    if (heading) {
      const name = HANDOVER_SECTIONS.find((s) => s.toLowerCase() === heading[1]!.toLowerCase())!;
      current = found.get(name) ?? [];
      found.set(name, current);
    } else current?.push(line);
  }
  return new Map([...found].map(([name, lines]) => [name, lines.join("\n").trim()]));
}

/**
 * The handover as stored: every section, in order. A section the model left
 * out keeps the previous handover's text; a reply with no section at all is
 * taken as the progress.
 */
export function handoverSummary(reply: string, previous: string | null): string {
  const sections = sectionsOf(reply);
  if (sections.size === 0 && reply.trim() !== "") sections.set("Progress", reply.trim());
  const before = previous ? sectionsOf(previous) : new Map<string, string>();
  return HANDOVER_SECTIONS.map((name) => `## ${name}\n${sections.get(name) || before.get(name) || "(none)"}`).join("\n\n");
}

// The system prompt an agent's model calls start with: the agent's own
// instructions, then the standing documents of its mounts (memory's notes).
// Within a conversation it stays byte for byte the same until the next
// compaction, because providers cache a request's prefix: the documents are
// written down in the log when the conversation starts (and after each
// compaction), and a later change reaches the model as a note instead.
import { clip } from "../../lib/text.ts";
import type { Standing } from "../../plugins/index.ts";
import { customSystemPrompt } from "./config.ts";
import type { Route } from "../chat.ts";
import type { ModelChoice } from "../models/index.ts";
import type { LogRow, MarkerData, StandingChange, StandingData } from "../store/index.ts";

export function systemPrompt(env: Env, route: Route, model: ModelChoice): string {
  const custom = customSystemPrompt(env);
  if (custom) return custom;
  const who = model.kind === "local" ? "the offline local model" : model.model;
  return (
    `You are "${route.agent}", an AI agent that works in a team chat (workspace "${route.tenant}"), running as ${who}. ` +
    "Answer concisely in Markdown. Use the tools you are given when they help; tool names are <mount>__<tool>. " +
    "Messages marked [runtime note] come from the runtime, not the person."
  );
}

/** A change note shows at most this many lines, each at most this long. */
const NOTE_LINES = 8;
const NOTE_LINE_CHARS = 300;

/**
 * Since the last compaction: the documents written down for the system
 * prompt, and each document as the model now knows it (those plus the
 * changes it was told of).
 */
export function standingState(rows: LogRow[]): { snapshot: StandingData | null; known: Map<string, string[]> } {
  const since = rows.slice(rows.findLastIndex((row) => row.type === "handover") + 1);
  const at = since.findIndex((row) => row.type === "standing");
  if (at < 0) return { snapshot: null, known: new Map() };
  const snapshot = JSON.parse(since[at]!.data) as StandingData;
  const known = new Map(Object.entries(snapshot.documents));
  for (const row of since.slice(at + 1)) {
    const change = row.type === "marker" ? (JSON.parse(row.data) as MarkerData).standing : undefined;
    if (change) known.set(change.alias, [...without(known.get(change.alias) ?? [], change.removed), ...change.added]);
  }
  return { snapshot, known };
}

/** The agent's instructions, then each written-down document its mount still shows. */
export function withStanding(base: string, snapshot: StandingData | null, docs: Standing[]): string {
  const sections = Object.entries(snapshot?.documents ?? {}).flatMap(([alias, lines]) => {
    const doc = docs.find((d) => d.alias === alias);
    return doc ? [doc.render(lines)] : [];
  });
  return [base, ...sections].join("\n\n");
}

/** The lines of `list` not matched one for one in `minus`. */
function without(list: string[], minus: string[]): string[] {
  const left = new Map<string, number>();
  for (const line of minus) left.set(line, (left.get(line) ?? 0) + 1);
  return list.filter((line) => {
    const n = left.get(line) ?? 0;
    if (n > 0) left.set(line, n - 1);
    return n === 0;
  });
}

/** What changed in each document since the model last knew it, as notes to append. */
export function standingNotes(known: Map<string, string[]>, docs: Standing[]): MarkerData[] {
  return docs.flatMap((doc) => {
    const before = known.get(doc.alias) ?? [];
    const change: StandingChange = { alias: doc.alias, added: without(doc.lines, before), removed: without(before, doc.lines) };
    if (change.added.length === 0 && change.removed.length === 0) return [];
    return [{ text: changeText(change), standing: change }];
  });
}

function changeText({ alias, added, removed }: StandingChange): string {
  // Removals first: a revised line reads as its old text, then its new one.
  const lines = [...removed.map((line) => `- ${line}`), ...added.map((line) => `+ ${line}`)];
  const more = lines.length > NOTE_LINES ? [`(and ${lines.length - NOTE_LINES} more changes)`] : [];
  return (
    `The notes of mount "${alias}" changed since this conversation's instructions were written (they still show the notes as they were):\n` +
    [...lines.slice(0, NOTE_LINES).map((line) => clip(line, NOTE_LINE_CHARS)), ...more].join("\n")
  );
}

// What the plugins that keep a document for the agent (memory, todo, journal)
// share: the scope rule (which document a conversation reads and writes), a
// document of one-line entries, and finding the one line a change is about.
import * as z from "zod";
import type { Audience, SessionState, ToolOutput } from "./contract.ts";

export const scopedConfig = z.object({
  /**
   * "audience" (the default): what is written in a DM belongs to that person's
   * DMs, what is written in a channel to the workspace's channels. "tenant":
   * one document for every conversation of the workspace, DMs and channels alike.
   */
  scope: z.enum(["audience", "tenant"]).default("audience"),
});
export type ScopedConfig = z.infer<typeof scopedConfig>;
export type Scope = ScopedConfig["scope"];

/** What a document is opened with: the mount's parsed config, its session, the conversation's audience. */
export interface DocumentContext {
  config: Record<string, unknown>;
  session: SessionState;
  audience: Audience;
}

/** The key, in the mount's session, of the document this conversation reads and writes. */
export const documentKey = (ctx: DocumentContext) => scopedDocument((ctx.config as ScopedConfig).scope, ctx.audience);

/** A document of lines, as it is now. */
export function openLines(ctx: DocumentContext): { key: string; lines: string[] } {
  const key = documentKey(ctx);
  return { key, lines: ctx.session.get<string[]>(key) ?? [] };
}

/** The scope rule: which document a conversation of this audience reads and writes. */
export function scopedDocument(scope: Scope, audience: Audience): string {
  if (scope === "tenant") return "doc:tenant";
  return audience.kind === "dm" ? `doc:dm:${audience.person}` : "doc:channels";
}

/** The scope rule in words, for the system prompt. */
export function describeScope(scope: Scope, audience: Audience): string {
  if (scope === "tenant") return "shared by every conversation in this workspace, direct messages and channels alike";
  return audience.kind === "dm" ? "private to your direct messages with this person" : "shared by this workspace's channels (never shown in direct messages)";
}

/** One line: whitespace (newlines too) folded to single spaces. */
export const oneLine = (text: string) => text.replace(/\s+/g, " ").trim();

export const numbered = (lines: { line: string; n: number }[]) => lines.map(({ line, n }) => `${n}. ${line}`).join("\n");

/** How a document's tools name what it holds ("note", "item") and the tool that lists them. */
export interface LineWords {
  one: string;
  list: string;
}

/** The lines containing `text`, each with its number, and how many times `text` occurs in all. */
function matches(lines: string[], text: string): { found: { line: string; n: number }[]; occurrences: number } {
  const found = lines.map((line, i) => ({ line, n: i + 1 })).filter(({ line }) => line.includes(text));
  return { found, occurrences: found.reduce((sum, { line }) => sum + line.split(text).length - 1, 0) };
}

/** Refuses zero or several matches (listing them); otherwise the one line's index. */
export function exactlyOne(lines: string[], text: string, verb: string, words: LineWords): { index: number } | ToolOutput {
  const { found, occurrences } = matches(lines, text);
  if (occurrences === 0) return { text: `No ${words.one} contains "${text}"; nothing was ${verb}. Use ${words.list} to see the ${words.one}s.`, isError: true };
  if (occurrences > 1) {
    return { text: `"${text}" occurs ${occurrences} times; nothing was ${verb}. Quote more of the ${words.one} so that it matches once:\n${numbered(found)}`, isError: true };
  }
  return { index: found[0]!.n - 1 };
}

/** How appending answers: what was done ("Remembered"), a line already there ("Already remembered"), a full document (how to make room). */
export interface AppendWords {
  done: string;
  already: string;
  full: string;
}

/** Appends one line, unless it is empty, already there (kept once), or the document holds `max` lines. */
export function appendLine(ctx: DocumentContext, text: string, max: number, words: LineWords & AppendWords): ToolOutput {
  const doc = openLines(ctx);
  const line = oneLine(text);
  if (line === "") return { text: `The ${words.one} is empty.`, isError: true };
  if (doc.lines.includes(line)) return { text: `${words.already}: "${line}".` };
  if (doc.lines.length >= max) return { text: words.full, isError: true };
  ctx.session.set(doc.key, [...doc.lines, line]);
  return { text: `${words.done}: "${line}".` };
}

/** Removes the one line containing `text` (refused, listing the matches, when none or several do); `said` words the answer. */
export function removeLine(ctx: DocumentContext, text: string, verb: string, words: LineWords, said: (line: string) => string): ToolOutput {
  const doc = openLines(ctx);
  const one = exactlyOne(doc.lines, text, verb, words);
  if (!("index" in one)) return one;
  ctx.session.set(doc.key, doc.lines.filter((_, i) => i !== one.index));
  return { text: said(doc.lines[one.index]!) };
}

/** The numbered lines containing `phrase` (any case), or all of them. */
export function listLines(lines: string[], phrase: string | undefined, words: LineWords): ToolOutput {
  const needle = phrase?.toLowerCase();
  const found = lines.map((line, i) => ({ line, n: i + 1 })).filter(({ line }) => !needle || line.toLowerCase().includes(needle));
  if (found.length === 0) return { text: needle ? `No ${words.one}s match "${phrase}".` : `No ${words.one}s yet.` };
  return { text: numbered(found) };
}

/** What the system prompt shows of a document, at most. */
export const PROMPT_CHARS = 8_000;

/**
 * The lines as the system prompt shows them, within `budget`: past it, the
 * oldest lines are shown by their first and last line around a marker naming
 * the tool that lists them, and the newest lines in full.
 */
export function renderLines(lines: string[], alias: string, words: LineWords, budget = PROMPT_CHARS): string {
  const shown = (line: string) => `- ${line}\n`;
  const size = (list: string[]) => list.reduce((sum, line) => sum + shown(line).length, 0);
  if (size(lines) <= budget) return lines.map(shown).join("");
  const marker = (omitted: number) => `[… ${omitted} older ${words.one}s not shown: ${alias}__${words.list} lists every ${words.one} …]\n`;
  // Keep the newest lines that fit beside the first and last of the older ones.
  for (let from = 1; from < lines.length; from++) {
    const older = lines.slice(0, from);
    const newer = lines.slice(from);
    const ends = older.length > 1 ? [older[0]!, older.at(-1)!] : older;
    const text = shown(ends[0]!) + (older.length > 2 ? marker(older.length - 2) : "") + (ends[1] ? shown(ends[1]) : "") + newer.map(shown).join("");
    if (text.length <= budget) return text;
  }
  return shown(lines[0]!) + marker(lines.length - 1);
}

// The memory plugin: a document of notes, one line each, that the agent keeps
// across conversations, in its mount's session state (the agent's own SQLite,
// so it survives evictions and deploys). It runs in the object: a write reads
// and replaces the document with no wait in between, so parallel writes on one
// agent lose nothing. The model always has it: it is the plugin's standing
// document, put in a conversation's system prompt (within a budget).
import * as z from "zod";
import type { Audience, Plugin, SessionState, StandingContext, ToolOutput } from "./contract.ts";

const MAX_LINES = 500;
const MAX_LINE = 500;
/** What the system prompt shows of the document, at most. */
export const MEMORY_PROMPT_CHARS = 8_000;

const config = z.object({
  /**
   * "audience" (the default): notes made in a DM belong to that person's DMs,
   * notes made in a channel to the workspace's channels. "tenant": one
   * document for every conversation of the workspace, DMs and channels alike.
   */
  scope: z.enum(["audience", "tenant"]).default("audience"),
});
type MemoryConfig = z.infer<typeof config>;

/** The scope rule: which document a conversation of this audience reads and writes. */
export function memoryDocument(scope: MemoryConfig["scope"], audience: Audience): string {
  if (scope === "tenant") return "doc:tenant";
  return audience.kind === "dm" ? `doc:dm:${audience.person}` : "doc:channels";
}

function describeScope(scope: MemoryConfig["scope"], audience: Audience): string {
  if (scope === "tenant") return "shared by every conversation in this workspace, direct messages and channels alike";
  return audience.kind === "dm" ? "private to your direct messages with this person" : "shared by this workspace's channels (never shown in direct messages)";
}

interface Doc {
  key: string;
  lines: string[];
}

function open(ctx: { config: Record<string, unknown>; session: SessionState; audience: Audience }): Doc {
  const key = memoryDocument((ctx.config as MemoryConfig).scope, ctx.audience);
  return { key, lines: ctx.session.get<string[]>(key) ?? [] };
}

/** One line: whitespace (newlines too) folded to single spaces. */
const oneLine = (text: string) => text.replace(/\s+/g, " ").trim();

const numbered = (lines: { line: string; n: number }[]) => lines.map(({ line, n }) => `${n}. ${line}`).join("\n");

/** The lines containing `text`, each with its number, and how many times `text` occurs in all. */
function matches(doc: Doc, text: string): { found: { line: string; n: number }[]; occurrences: number } {
  const found = doc.lines.map((line, i) => ({ line, n: i + 1 })).filter(({ line }) => line.includes(text));
  return { found, occurrences: found.reduce((sum, { line }) => sum + line.split(text).length - 1, 0) };
}

/** Refuses zero or several matches (listing them); otherwise the one line's index. */
function exactlyOne(doc: Doc, text: string, verb: string): { index: number } | ToolOutput {
  const { found, occurrences } = matches(doc, text);
  if (occurrences === 0) return { text: `No note contains "${text}"; nothing was ${verb}. Use recall to see the notes.`, isError: true };
  if (occurrences > 1) {
    return { text: `"${text}" occurs ${occurrences} times; nothing was ${verb}. Quote more of the note so that it matches once:\n${numbered(found)}`, isError: true };
  }
  return { index: found[0]!.n - 1 };
}

/**
 * The lines as the system prompt shows them, within MEMORY_PROMPT_CHARS: past
 * it, the oldest lines are shown by their first and last line around a marker
 * naming `recall`, and the newest lines in full.
 */
export function renderMemory(lines: string[], alias: string, budget = MEMORY_PROMPT_CHARS): string {
  const shown = (line: string) => `- ${line}\n`;
  const size = (list: string[]) => list.reduce((sum, line) => sum + shown(line).length, 0);
  if (size(lines) <= budget) return lines.map(shown).join("");
  const marker = (omitted: number) => `[… ${omitted} older notes not shown: ${alias}__recall lists every note …]\n`;
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

export const memoryPlugin: Plugin = {
  name: "memory",
  description: "Notes the agent keeps across conversations, one line each, always shown to it.",
  runsIn: "object",
  config,
  standing: {
    lines: (ctx: StandingContext) => open(ctx).lines,
    render(lines, ctx) {
      const scope = (ctx.config as MemoryConfig).scope;
      const body = lines.length > 0 ? renderMemory(lines, ctx.alias) : "(no notes yet)\n";
      return (
        `## Memory (mount "${ctx.alias}")\n` +
        `Notes kept across conversations, ${describeScope(scope, ctx.audience)}. They are shown as they were when this conversation started; ` +
        `changes since then arrive as runtime notes. ${ctx.alias}__recall lists them as they are now; ` +
        `${ctx.alias}__remember, ${ctx.alias}__revise and ${ctx.alias}__forget change them.\n${body}`
      );
    },
  },
  tools: [
    {
      name: "remember",
      description: "Append a note (one line) to memory. Use it for facts worth keeping beyond this conversation.",
      parameters: z.object({ text: z.string().min(1).max(MAX_LINE) }),
      sideEffects: "write",
      idempotency: "idempotent", // the same note twice is kept once
      async call({ text }, ctx) {
        const doc = open(ctx);
        const line = oneLine(text);
        if (line === "") return { text: "The note is empty.", isError: true };
        if (doc.lines.includes(line)) return { text: `Already remembered: "${line}".` };
        if (doc.lines.length >= MAX_LINES) return { text: `Memory is full (${MAX_LINES} notes): forget or revise one first.`, isError: true };
        ctx.session.set(doc.key, [...doc.lines, line]);
        return { text: `Remembered: "${line}".` };
      },
    },
    {
      name: "revise",
      description:
        "Replace text in one note: `find` must occur exactly once in all of memory (it is refused otherwise, with the notes that match). An empty `replace` deletes the text; a note left empty is removed.",
      parameters: z.object({ find: z.string().min(1).max(MAX_LINE), replace: z.string().max(MAX_LINE) }),
      sideEffects: "write",
      idempotency: "never", // a replayed revision could apply twice ("40k" → "40k USD" → "40k USD USD")
      async call({ find, replace }, ctx) {
        const doc = open(ctx);
        const one = exactlyOne(doc, find, "revised");
        if (!("index" in one)) return one;
        const before = doc.lines[one.index]!;
        const after = oneLine(before.replace(find, () => replace)).slice(0, MAX_LINE);
        const lines = after === "" ? doc.lines.filter((_, i) => i !== one.index) : doc.lines.map((line, i) => (i === one.index ? after : line));
        ctx.session.set(doc.key, lines);
        return { text: after === "" ? `Removed the note "${before}".` : `Revised: "${before}" is now "${after}".` };
      },
    },
    {
      name: "forget",
      description: "Delete the one note containing `text` (refused, with the notes that match, when none or several do).",
      parameters: z.object({ text: z.string().min(1).max(MAX_LINE) }),
      sideEffects: "write",
      idempotency: "idempotent", // a replay finds nothing more to delete
      async call({ text }, ctx) {
        const doc = open(ctx);
        const one = exactlyOne(doc, text, "forgotten");
        if (!("index" in one)) return one;
        ctx.session.set(doc.key, doc.lines.filter((_, i) => i !== one.index));
        return { text: `Forgot "${doc.lines[one.index]}".` };
      },
    },
    {
      name: "recall",
      description: "List the notes in memory (numbered), optionally only those containing a phrase. The system prompt may show only part of a long memory.",
      parameters: z.object({ phrase: z.string().optional() }),
      sideEffects: "read",
      idempotency: "idempotent",
      async call({ phrase }, ctx) {
        const needle = phrase?.toLowerCase();
        const found = open(ctx)
          .lines.map((line, i) => ({ line, n: i + 1 }))
          .filter(({ line }) => !needle || line.toLowerCase().includes(needle));
        if (found.length === 0) return { text: needle ? `No notes match "${phrase}".` : "No notes yet." };
        return { text: numbered(found) };
      },
    },
  ],
};

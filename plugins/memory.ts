// The memory plugin: a document of notes, one line each, that the agent keeps
// across conversations, in its mount's session state (the agent's own SQLite,
// so it survives evictions and deploys). It runs in the object: a write reads
// and replaces the document with no wait in between, so parallel writes on one
// agent lose nothing. The model always has it: it is the plugin's standing
// document, put in a conversation's system prompt (within a budget).
import * as z from "zod";
import type { Plugin, StandingContext } from "./contract.ts";
import { appendLine, describeScope, exactlyOne, removeLine, listLines, oneLine, openLines, renderLines, scopedConfig, type ScopedConfig } from "./documents.ts";

const MAX_LINES = 500;
const MAX_LINE = 500;
const WORDS = { one: "note", list: "recall" };

/** The notes as the system prompt shows them (within PROMPT_CHARS, the oldest folded around a marker naming `recall`). */
export const renderMemory = (lines: string[], alias: string) => renderLines(lines, alias, WORDS);

export const memoryPlugin: Plugin = {
  name: "memory",
  description: "Notes the agent keeps across conversations, one line each, always shown to it.",
  runsIn: "object",
  config: scopedConfig,
  standing: {
    lines: (ctx: StandingContext) => openLines(ctx).lines,
    render(lines, ctx) {
      const scope = (ctx.config as ScopedConfig).scope;
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
        return appendLine(ctx, text, MAX_LINES, { ...WORDS, done: "Remembered", already: "Already remembered", full: `Memory is full (${MAX_LINES} notes): forget or revise one first.` });
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
        const doc = openLines(ctx);
        const one = exactlyOne(doc.lines, find, "revised", WORDS);
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
        return removeLine(ctx, text, "forgotten", WORDS, (line) => `Forgot "${line}".`);
      },
    },
    {
      name: "recall",
      description: "List the notes in memory (numbered), optionally only those containing a phrase. The system prompt may show only part of a long memory.",
      parameters: z.object({ phrase: z.string().optional() }),
      sideEffects: "read",
      idempotency: "idempotent",
      async call({ phrase }, ctx) {
        return listLines(openLines(ctx).lines, phrase, WORDS);
      },
    },
  ],
};

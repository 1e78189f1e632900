// The todo plugin: the agent's open items, one line each, edited in place and
// removed when done, kept across conversations in its mount's session state
// like memory's notes, with memory's scope rule (a DM's items stay in that
// person's DMs). It runs in the object, so parallel changes lose nothing, and
// the open items are its standing document (in the system prompt).
import * as z from "zod";
import type { Plugin, StandingContext } from "./contract.ts";
import { appendLine, describeScope, exactlyOne, removeLine, listLines, oneLine, openLines, renderLines, scopedConfig, type ScopedConfig } from "./documents.ts";

const MAX_ITEMS = 200;
const MAX_ITEM = 500;
const WORDS = { one: "item", list: "list" };

export const todoPlugin: Plugin = {
  name: "todo",
  description: "The agent's open items, one line each, kept across conversations and always shown to it.",
  runsIn: "object",
  config: scopedConfig,
  standing: {
    lines: (ctx: StandingContext) => openLines(ctx).lines,
    render(lines, ctx) {
      const scope = (ctx.config as ScopedConfig).scope;
      const body = lines.length > 0 ? renderLines(lines, ctx.alias, WORDS) : "(nothing open)\n";
      return (
        `## Todo (mount "${ctx.alias}")\n` +
        `Open items, ${describeScope(scope, ctx.audience)}, as they were when this conversation started; changes since arrive as runtime notes. ` +
        `${ctx.alias}__list lists them as they are now; ${ctx.alias}__add, ${ctx.alias}__edit and ${ctx.alias}__done change them.\n${body}`
      );
    },
  },
  tools: [
    {
      name: "add",
      description: "Add an open item (one line) to the todo list.",
      parameters: z.object({ item: z.string().min(1).max(MAX_ITEM) }),
      sideEffects: "write",
      idempotency: "idempotent", // the same item twice is kept once
      async call({ item }, ctx) {
        return appendLine(ctx, item, MAX_ITEMS, { ...WORDS, done: "Added", already: "Already open", full: `The todo list is full (${MAX_ITEMS} open items): mark one done first.` });
      },
    },
    {
      name: "edit",
      description: "Replace text in one open item, in place: `find` must occur exactly once in the list (it is refused otherwise, with the items that match).",
      parameters: z.object({ find: z.string().min(1).max(MAX_ITEM), replace: z.string().min(1).max(MAX_ITEM) }),
      sideEffects: "write",
      idempotency: "never", // a replayed edit could apply twice
      async call({ find, replace }, ctx) {
        const doc = openLines(ctx);
        const one = exactlyOne(doc.lines, find, "edited", WORDS);
        if (!("index" in one)) return one;
        const before = doc.lines[one.index]!;
        const after = oneLine(before.replace(find, () => replace)).slice(0, MAX_ITEM);
        ctx.session.set(doc.key, doc.lines.map((line, i) => (i === one.index ? after : line)));
        return { text: `Edited: "${before}" is now "${after}".` };
      },
    },
    {
      name: "done",
      description: "Mark the one open item containing `text` done: it leaves the list (refused, with the items that match, when none or several do).",
      parameters: z.object({ text: z.string().min(1).max(MAX_ITEM) }),
      sideEffects: "write",
      idempotency: "idempotent", // a replay finds nothing more to remove
      async call({ text }, ctx) {
        return removeLine(ctx, text, "marked done", WORDS, (line) => `Done: "${line}".`);
      },
    },
    {
      name: "list",
      description: "List the open items (numbered), optionally only those containing a phrase.",
      parameters: z.object({ phrase: z.string().optional() }),
      sideEffects: "read",
      idempotency: "idempotent",
      async call({ phrase }, ctx) {
        return listLines(openLines(ctx).lines, phrase, WORDS);
      },
    },
  ],
};

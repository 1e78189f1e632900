// The journal plugin: entries the agent writes, one call per entry, kept
// across conversations with memory's scope rule (a DM's entries stay in that
// person's DMs). Append-only and never trimmed in storage; the system prompt
// shows the newest first, only those of the last `promptDays` days, within a
// budget. Entries are kept in pages in the mount's session state (the agent's
// SQLite); an entry too long for a page spills to R2 (LARGE_VALUES) and the
// page keeps its start and the reference, which `read` pages through.
import { env } from "cloudflare:workers";
import * as z from "zod";
import { clip, safeCut } from "../lib/text.ts";
import type { Plugin, StandingContext, ToolContext } from "./contract.ts";
import { describeScope, documentKey, oneLine, PROMPT_CHARS, scopedConfig, type DocumentContext } from "./documents.ts";

/** Entries per page (one session value each). */
const PAGE_ENTRIES = 100;
/** An entry longer than this spills to R2; its page keeps the first PREVIEW_CHARS. */
const INLINE_CHARS = 4_000;
const PREVIEW_CHARS = 300;
/** 1 MiB of text (UTF-16 units): the model's call carries it whole, and the call is kept in a SQLite row (2 MB at most). */
const MAX_ENTRY_CHARS = 1_048_576;
/** What one `read` returns of an entry, under the gateway's 64,000-character cap on a result. */
const READ_CHARS = 50_000;
/** An entry's line in the prompt and in `entries`. */
const LINE_CHARS = 300;
const PROMPT_ENTRIES = 100;
const LIST_ENTRIES = 50;
const DAY_MS = 86_400_000;

const config = scopedConfig.extend({
  /** Entries older than this many days are left out of the system prompt (never out of storage). */
  promptDays: z.number().positive().max(3650).default(7),
});
type JournalConfig = z.infer<typeof config>;

interface Entry {
  n: number;
  at: number;
  /** The call that wrote it: a replayed call finds its entry and writes nothing. */
  key: string;
  /** The whole text, or its first PREVIEW_CHARS when it spilled to R2 under `ref`. */
  text: string;
  chars: number;
  ref?: string;
}

const countKey = (doc: string) => `${doc}:count`;
const pageKey = (doc: string, n: number) => `${doc}:page:${Math.floor((n - 1) / PAGE_ENTRIES)}`;

class Journal {
  readonly doc: string;
  private readonly pages = new Map<string, Entry[]>();
  constructor(private readonly ctx: DocumentContext) {
    this.doc = documentKey(ctx);
  }
  count(): number {
    return this.ctx.session.get<number>(countKey(this.doc)) ?? 0;
  }
  page(n: number): Entry[] {
    const key = pageKey(this.doc, n);
    let page = this.pages.get(key);
    if (!page) this.pages.set(key, (page = this.ctx.session.get<Entry[]>(key) ?? []));
    return page;
  }
  entry(n: number): Entry | undefined {
    return n >= 1 && n <= this.count() ? this.page(n).find((e) => e.n === n) : undefined;
  }
  /** The newest first, from entry `from` down, at most `limit`. */
  *newest(from = this.count(), limit = Infinity): Generator<Entry> {
    for (let n = from; n >= 1 && n > from - limit; n--) {
      const entry = this.entry(n);
      if (entry) yield entry;
    }
  }
  /** Appends, with no wait in between reading and writing. */
  append(entry: Omit<Entry, "n">): Entry {
    const n = this.count() + 1;
    const written = { ...entry, n };
    this.ctx.session.set(pageKey(this.doc, n), [...this.page(n), written]);
    this.ctx.session.set(countKey(this.doc), n);
    return written;
  }
}

/** An entry as one line: its number, time and text, clipped, naming `read` when there is more. */
function entryLine(entry: Entry, alias: string): string {
  const when = new Date(entry.at).toISOString().slice(0, 16).replace("T", " ");
  const line = oneLine(entry.text);
  const text = clip(line, LINE_CHARS);
  const more = entry.ref !== undefined || text !== line ? ` [${entry.chars} characters: ${alias}__read({"entry":${entry.n}})]` : "";
  return `#${entry.n} ${when} UTC: ${text}${more}`;
}

/** Where an entry too long for its page is kept: one object per call, so a replay writes the same one. */
function spillKey(ctx: ToolContext): string {
  return `journal/${[ctx.tenant, ctx.agent, ctx.alias, ctx.callKey].map(encodeURIComponent).join("/")}.txt`;
}

/** The newest lines that fit within PROMPT_CHARS, then a marker naming `entries` when some did not. */
function renderNewestFirst(lines: string[], alias: string): string {
  const marker = `[… older entries not shown: ${alias}__entries lists every entry …]\n`;
  let out = "";
  for (const [i, line] of lines.entries()) {
    const shown = `- ${line}\n`;
    // The marker must fit too, unless this is the last line.
    const room = PROMPT_CHARS - (i < lines.length - 1 ? marker.length : 0);
    if (out.length + shown.length > room) return out + marker;
    out += shown;
  }
  return out;
}

export const journalPlugin: Plugin = {
  name: "journal",
  description: "The agent's journal: entries it appends, kept whole, the recent ones always shown to it, newest first.",
  runsIn: "object",
  config,
  standing: {
    lines(ctx: StandingContext) {
      const since = Date.now() - (ctx.config as JournalConfig).promptDays * DAY_MS;
      const lines: string[] = [];
      for (const entry of new Journal(ctx).newest()) {
        if (entry.at < since || lines.length >= PROMPT_ENTRIES) break;
        lines.push(entryLine(entry, ctx.alias));
      }
      return lines;
    },
    render(lines, ctx) {
      const { scope, promptDays } = ctx.config as JournalConfig;
      const body = lines.length > 0 ? renderNewestFirst(lines, ctx.alias) : "(no entries)\n";
      return (
        `## Journal (mount "${ctx.alias}")\n` +
        `Entries ${describeScope(scope, ctx.audience)}, newest first, those of the last ${promptDays} days as they were when this conversation started; ` +
        `entries written since arrive as runtime notes. ${ctx.alias}__write appends one; ${ctx.alias}__entries lists them all; ${ctx.alias}__read reads one whole.\n${body}`
      );
    },
  },
  tools: [
    {
      name: "write",
      description: `Append one entry to the journal (what happened, what was decided). Entries are never changed or removed. At most ${MAX_ENTRY_CHARS} characters.`,
      parameters: z.object({ text: z.string().min(1).max(MAX_ENTRY_CHARS) }),
      sideEffects: "write",
      idempotency: "idempotent", // a replayed call finds the entry it wrote
      async call({ text }, ctx) {
        if (text.trim() === "") return { text: "The entry is empty.", isError: true };
        // A replay comes before many other writes could: the newest page's worth is searched.
        const already = [...new Journal(ctx).newest(undefined, PAGE_ENTRIES)].find((e) => e.key === ctx.callKey);
        if (already) return { text: `Already written: entry #${already.n}.` };
        const ref = text.length > INLINE_CHARS ? spillKey(ctx) : undefined;
        if (ref) await env.LARGE_VALUES.put(ref, text);
        // After the wait: read and append in one go, so parallel writes lose nothing.
        const entry = new Journal(ctx).append({ at: Date.now(), key: ctx.callKey, text: ref ? text.slice(0, safeCut(text, PREVIEW_CHARS)) : text, chars: text.length, ...(ref ? { ref } : {}) });
        return { text: `Written: entry #${entry.n} (${entry.chars} characters${ref ? ", kept in large-value storage" : ""}).` };
      },
    },
    {
      name: "entries",
      description: `List journal entries, newest first, ${LIST_ENTRIES} at a time, each on one line (long ones clipped: read gives them whole). \`before\`: start below this entry number.`,
      parameters: z.object({ before: z.number().int().positive().optional() }),
      sideEffects: "read",
      idempotency: "idempotent",
      async call({ before }, ctx) {
        const journal = new Journal(ctx);
        const from = Math.min(journal.count(), (before ?? Infinity) - 1);
        const entries = [...journal.newest(from, LIST_ENTRIES)];
        if (entries.length === 0) return { text: journal.count() === 0 ? "No entries yet." : "No older entries." };
        const last = entries.at(-1)!.n;
        const older = last > 1 ? `\nOlder entries: ${ctx.alias}__entries({"before":${last}}).` : "";
        return { text: entries.map((e) => entryLine(e, ctx.alias)).join("\n") + older };
      },
    },
    {
      name: "read",
      description: `Read one journal entry whole, ${READ_CHARS} characters at a time from \`offset\` (0 first); the answer says where the next part starts.`,
      parameters: z.object({ entry: z.number().int().positive(), offset: z.number().int().min(0).default(0) }),
      sideEffects: "read",
      idempotency: "idempotent",
      async call({ entry: n, offset }, ctx) {
        const entry = new Journal(ctx).entry(n);
        if (!entry) return { text: `There is no entry #${n}; ${ctx.alias}__entries lists them.`, isError: true };
        if (offset > entry.chars) return { text: `Entry #${n} has ${entry.chars} characters; offset ${offset} is past its end.`, isError: true };
        let text = entry.text;
        if (entry.ref) {
          const object = await env.LARGE_VALUES.get(entry.ref);
          if (!object) return { text: `Entry #${n}'s text is missing from large-value storage (${entry.ref}).`, isError: true };
          text = await object.text();
        }
        const end = offset + READ_CHARS >= text.length ? text.length : safeCut(text, offset + READ_CHARS);
        const next = end < text.length ? `next: ${ctx.alias}__read({"entry":${n},"offset":${end}})` : "the end";
        return { text: `Entry #${n}, characters ${offset}–${end} of ${text.length}; ${next}.\n\n${text.slice(offset, end)}` };
      },
    },
  ],
};

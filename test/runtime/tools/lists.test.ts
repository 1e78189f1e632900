// The agent's lists: `todo` (open items, edited in place) and `journal`
// (append-only, newest first in the prompt, trimmed there by age, never in
// storage; a long entry spills to R2 and is read back whole through `read`).
// Both keep memory's scope rule and are standing documents: in a new
// conversation's first request, and the system prompt stays byte-identical
// within a conversation. Seen from the fake provider's recorded requests.
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { journalPlugin } from "../../../plugins/journal.ts";
import type { SessionState, ToolContext } from "../../../plugins/index.ts";
import { evict, rows } from "../../agents.ts";
import { firstPrompt, slackConversation, slackId } from "../../bridges/slack/helpers.ts";
import { postMessage, providerRequests, script, settled, systemOf, unique, worker, type ProviderRequest, type View } from "../../support.ts";

const A = "lister";
const ADMIN = { authorization: "Bearer test-admin-token", "content-type": "application/json" };
const LISTS = [
  { alias: "todo", plugin: "todo" },
  { alias: "journal", plugin: "journal" },
];

/** Mounts todo and journal (and `more`) for every agent of a tenant. */
async function mountLists(tenant: string, more: unknown[] = []): Promise<void> {
  const res = await worker(`/v1/tenants/${tenant}/mounts`, { method: "PUT", headers: ADMIN, body: JSON.stringify([...LISTS, ...more]) });
  expect(res.status).toBe(200);
}

async function turn(tenant: string, conversation: string, text: string): Promise<View> {
  await postMessage(tenant, A, { text, conversation });
  return settled(tenant, A, conversation, 25_000);
}

const call = (name: string, args: unknown) => ({ name, arguments: args });
const toolTexts = (view: View) => view.transcript.filter((e) => e.role === "tool").map((e) => e.text);
const userTexts = (request: ProviderRequest) => request.body.messages.filter((m) => m.role === "user").map((m) => m.content as string);

describe("todo and journal across conversations", () => {
  it("survive the conversation (and an eviction) and are in the next conversation's first request: todo edited in place, journal newest first", async () => {
    const T = unique("lists");
    await mountLists(T);
    const first = unique("first");
    await script(first, [
      {
        toolCalls: [
          call("todo__add", { item: "Send the Q3 report to Ana" }),
          call("todo__add", { item: "Book the offsite venue" }),
          call("todo__add", { item: "Renew the domain" }),
          call("todo__edit", { find: "Q3 report", replace: "Q3 and Q4 reports" }),
          call("todo__done", { text: "domain" }),
          call("journal__write", { text: "Met Ana about the budget:\nit stays at 40k." }),
          call("journal__write", { text: "Decided to hold the offsite in May." }),
        ],
      },
      { text: "Noted." },
    ]);
    const view = await turn(T, first, `[s:${first}] plan`);
    expect(toolTexts(view)).toEqual([
      'Added: "Send the Q3 report to Ana".',
      'Added: "Book the offsite venue".',
      'Added: "Renew the domain".',
      'Edited: "Send the Q3 report to Ana" is now "Send the Q3 and Q4 reports to Ana".',
      'Done: "Renew the domain".',
      "Written: entry #1 (42 characters).",
      "Written: entry #2 (35 characters).",
    ]);
    await evict(T, A);

    const next = unique("next");
    await script(next, [{ text: "Hello." }]);
    await turn(T, next, `[s:${next}] hello`);
    const system = systemOf((await providerRequests(next))[0]!);
    expect(system).toContain('## Todo (mount "todo")');
    // In place: the edited item keeps its position, the done one is gone.
    expect(system).toContain("- Send the Q3 and Q4 reports to Ana\n- Book the offsite venue\n");
    expect(system).not.toContain("domain");
    expect(system).toContain('## Journal (mount "journal")');
    const day = new Date().toISOString().slice(0, 10);
    expect(system).toMatch(new RegExp(`- #2 ${day} \\d\\d:\\d\\d UTC: Decided to hold the offsite in May\\.\\n- #1 ${day} \\d\\d:\\d\\d UTC: Met Ana about the budget: it stays at 40k\\.\\n`));
  });

  it("the system prompt stays byte-identical within a conversation while another changes both lists; each change arrives as a note", async () => {
    const T = unique("stable");
    await mountLists(T);
    const seed = unique("seed");
    await script(seed, [{ toolCalls: [call("todo__add", { item: "Draft the plan" }), call("journal__write", { text: "Started the plan." })] }, { text: "Ok." }]);
    await turn(T, seed, `[s:${seed}] start`);

    const s = unique("six");
    await script(s, Array.from({ length: 6 }, (_, n) => ({ text: `Answer ${n + 1}.` })));
    const other = unique("other");
    await script(other, [{ toolCalls: [call("todo__done", { text: "Draft" }), call("todo__add", { item: "Review the plan" }), call("journal__write", { text: "Finished the draft." })] }, { text: "Ok." }]);
    for (let n = 1; n <= 6; n++) {
      if (n === 3) await turn(T, other, `[s:${other}] progress`);
      await turn(T, s, n === 1 ? `[s:${s}] question 1` : `question ${n}`);
    }

    const requests = await providerRequests(s);
    expect(requests).toHaveLength(6);
    const system = systemOf(requests[0]!);
    expect(system).toContain("- Draft the plan\n");
    expect(system).toContain("UTC: Started the plan.\n");
    for (const request of requests) expect(systemOf(request)).toBe(system);
    // The notes of the turn after the other conversation's changes, one per list.
    const note = userTexts(requests[2]!).filter((text) => text.startsWith("[runtime note]")).join("\n");
    expect(note).toContain('The notes of mount "todo" changed');
    expect(note).toContain("- Draft the plan\n+ Review the plan");
    expect(note).toContain('The notes of mount "journal" changed');
    expect(note).toMatch(/\+ #2 \S+ \S+ UTC: Finished the draft\./);
  }, 60_000);
});

describe("a journal entry too long for its page", () => {
  /** 1 MiB of text, made the same way here and in the script that reads it back: numbers, newlines, an accent, an emoji (a surrogate pair). */
  function makeEntry(): string {
    let s = "";
    for (let i = 0; s.length < 1048576; i++) s += i % 97 === 0 ? "é🙂\n" : i.toString(36) + " ";
    return s.slice(0, 1048576 - 2) + "🙂";
  }

  it("a 1 MiB entry spills to R2 (the agent's SQLite keeps a preview and the reference) and read pages it back whole", async () => {
    const T = unique("spill");
    await mountLists(T, [{ alias: "js", plugin: "js", config: { maxToolCalls: 40, wallMs: 60_000 } }]);
    const entry = makeEntry();
    expect(entry.length).toBe(1_048_576);
    const s = unique("big");
    await script(s, [{ toolCalls: [call("journal__write", { text: entry })] }, { text: "Written." }]);
    expect(toolTexts(await turn(T, s, `[s:${s}] keep this`))).toEqual(["Written: entry #1 (1048576 characters, kept in large-value storage)."]);

    const listed = await env.LARGE_VALUES.list({ prefix: `journal/${T}/${A}/journal/` });
    expect(listed.objects).toHaveLength(1);
    expect(await (await env.LARGE_VALUES.get(listed.objects[0]!.key))!.text()).toBe(entry);
    const [largest] = await rows<{ size: number }>(T, A, "SELECT max(length(value)) AS size FROM mount_sessions WHERE alias = 'journal'");
    expect(largest!.size).toBeLessThan(2_000);

    // Read back through the tool, page after page, by a script (the model would carry every page in its context).
    const reader = unique("read");
    const code = `(async () => {
      const expected = (${makeEntry.toString()})();
      let text = "", offset = 0, pages = 0;
      for (;;) {
        const page = await tools.journal.read({ entry: 1, offset });
        const at = page.indexOf("\\n\\n");
        text += page.slice(at + 2);
        pages++;
        const next = /"offset":(\\d+)/.exec(page.slice(0, at));
        if (!next) break;
        offset = Number(next[1]);
      }
      return { whole: text === expected, chars: text.length, pages };
    })()`;
    await script(reader, [{ toolCalls: [call("js__run", { code })] }, { text: "Read." }]);
    const [result] = toolTexts(await turn(T, reader, `[s:${reader}] read it back`));
    expect(result).toBe(`Result: ${JSON.stringify({ whole: true, chars: 1_048_576, pages: 21 })}`);
    // The prompt shows the entry's start and says how to read the rest.
    const system = systemOf((await providerRequests(reader))[0]!);
    expect(system).toContain(`[1048576 characters: journal__read({"entry":1})]`);
  }, 90_000);
});

describe("parallel journal writes", () => {
  it("writes made at once (a script's, each spilling to R2 and so waiting mid-write, beside short ones) lose nothing", async () => {
    const T = unique("parallel");
    await mountLists(T);
    // A script's calls reach the object one by one while the others wait on R2: the writes interleave.
    const code = `(async () => {
      const long = (i) => "p" + i + " " + "x".repeat(5000);
      const writes = [0, 1, 2, 3, 4].flatMap((i) => [tools.journal.write({ text: long(i) }), tools.journal.write({ text: "q" + i })]);
      return (await Promise.all(writes)).length;
    })()`;
    const s = unique("p");
    await script(s, [{ toolCalls: [call("js__run", { code })] }, { text: "Done." }]);
    expect(toolTexts(await turn(T, s, `[s:${s}] go`))).toEqual(["Result: 10"]);
    const [page] = await rows<{ value: string }>(T, A, "SELECT value FROM mount_sessions WHERE alias = 'journal' AND key = 'doc:channels:page:0'");
    const entries = JSON.parse(page!.value) as { n: number; text: string; chars: number }[];
    expect(entries.map((e) => e.n)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
    expect(entries.map((e) => e.text.slice(0, 2)).toSorted()).toEqual(["p0", "p1", "p2", "p3", "p4", "q0", "q1", "q2", "q3", "q4"]);
    expect(entries.filter((e) => e.chars > 5_000)).toHaveLength(5);
  });
});

describe("scopes and age", () => {
  it("a DM's todo and journal stay in that DM; a channel's reach the channels and no DM", async () => {
    const team = slackId("T");
    await mountLists(team);
    const ana = { dm: slackId("D"), user: "UANA" };
    const general = { channel: slackId("C"), user: "UBOB" };
    const inDm = unique("dm");
    await script(inDm, [{ toolCalls: [call("todo__add", { item: "Ana's visa papers" }), call("journal__write", { text: "Ana asked about her visa." })] }, { text: "Ok." }]);
    await slackConversation(team, ana, `[s:${inDm}] note my visa`);
    const inChannel = unique("ch");
    await script(inChannel, [{ toolCalls: [call("todo__add", { item: "Ship the release" }), call("journal__write", { text: "Release planned." })] }, { text: "Ok." }]);
    await slackConversation(team, general, `[s:${inChannel}] plan the release`);

    const anaAgain = await firstPrompt(team, ana);
    expect(anaAgain).toContain("- Ana's visa papers\n");
    expect(anaAgain).toContain("UTC: Ana asked about her visa.\n");
    expect(anaAgain).not.toContain("release");
    for (const where of [{ dm: slackId("D"), user: "UBOB" }, { channel: slackId("C"), user: "UANA" }]) {
      const prompt = await firstPrompt(team, where);
      expect(prompt).not.toContain("visa");
      expect(prompt.includes("- Ship the release\n")).toBe(!("dm" in where));
    }
  }, 60_000);

  it("the prompt leaves out entries older than promptDays; storage keeps them, and entries and read still give them", async () => {
    const T = unique("age");
    await mountLists(T);
    const s = unique("write");
    await script(s, [{ toolCalls: ["Old decision.", "Middle decision.", "New decision."].map((text) => call("journal__write", { text })) }, { text: "Ok." }]);
    await turn(T, s, `[s:${s}] write`);
    // Entry #1 was written 8 days ago (the default promptDays is 7).
    await rows(T, A, "UPDATE mount_sessions SET value = json_set(value, '$[0].at', ?) WHERE alias = 'journal' AND key = 'doc:channels:page:0'", Date.now() - 8 * 86_400_000);

    const next = unique("next");
    await script(next, [{ toolCalls: [call("journal__entries", {}), call("journal__read", { entry: 1 })] }, { text: "Ok." }]);
    const view = await turn(T, next, `[s:${next}] look back`);
    const system = systemOf((await providerRequests(next))[0]!);
    expect(system).toMatch(/- #3 .* UTC: New decision\.\n- #2 .* UTC: Middle decision\.\n/);
    expect(system).not.toContain("Old decision.");
    const [entries, read] = toolTexts(view);
    expect(entries!.split("\n").map((line) => line.replace(/ \S+ \S+ UTC:/, ""))).toEqual(["#3 New decision.", "#2 Middle decision.", "#1 Old decision."]);
    expect(read).toBe("Entry #1, characters 0–13 of 13; the end.\n\nOld decision.");
  });
});

describe("the journal in the prompt", () => {
  it("shows the newest entries that fit within 8,000 characters, then a marker naming entries", () => {
    const lines = Array.from({ length: 100 }, (_, i) => `#${100 - i} 2026-12-01 10:00 UTC: ${"y".repeat(280)}`);
    const ctx = { alias: "journal", config: { scope: "audience", promptDays: 7 }, audience: { kind: "channel" } as const };
    const body = journalPlugin.standing!.render(lines, ctx).split("\n").slice(2, -1);
    expect(body.join("\n").length).toBeLessThanOrEqual(8_000);
    expect(body.at(-1)).toBe("[… older entries not shown: journal__entries lists every entry …]");
    expect(body.slice(0, -1)).toEqual(lines.slice(0, body.length - 1).map((line) => `- ${line}`));
    expect(journalPlugin.standing!.render(lines.slice(0, 3), ctx)).toContain(lines.slice(0, 3).map((line) => `- ${line}\n`).join(""));
  });
});

describe("the journal's write", () => {
  /** A session over a plain map: the plugin's contract, as a courier's copy of a mount's session is. */
  function mapSession(): SessionState {
    const values = new Map<string, unknown>();
    return { get: <T>(key: string) => values.get(key) as T | undefined, set: (key, value) => void values.set(key, structuredClone(value)) };
  }
  const write = journalPlugin.tools.find((t) => t.name === "write")!;
  const ctx = (session: SessionState, callKey: string): ToolContext => ({
    callKey,
    alias: "journal",
    tenant: "unit",
    agent: "unit",
    conversation: "c",
    audience: { kind: "channel" },
    config: { scope: "audience", promptDays: 7 },
    session,
  });

  it("a replayed call (same key) writes nothing more; another call appends; an empty entry is refused", async () => {
    const session = mapSession();
    expect((await write.call({ text: "One." }, ctx(session, "k1"))).text).toBe("Written: entry #1 (4 characters).");
    expect((await write.call({ text: "One." }, ctx(session, "k1"))).text).toBe("Already written: entry #1.");
    expect((await write.call({ text: "One." }, ctx(session, "k2"))).text).toBe("Written: entry #2 (4 characters).");
    expect(await write.call({ text: " \n " }, ctx(session, "k3"))).toEqual({ text: "The entry is empty.", isError: true });
    expect(session.get("doc:channels:count")).toBe(2);
  });
});

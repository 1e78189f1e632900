// Memory the model always has: a document of notes per agent and scope (a
// person's DMs, the workspace's channels, or tenant-wide when mounted so), put
// in a conversation's system prompt when it starts, byte for byte the same
// until a compaction, with later changes told in a note. Seen from the fake
// provider's recorded requests.
import { describe, expect, it } from "vitest";
import { renderMemory } from "../../plugins/memory.ts";
import { evict, rows } from "../agents.ts";
import { firstPrompt, slackConversation as slack, slackId } from "../bridges/slack/helpers.ts";
import { postMessage, providerRequests, script, settled, systemOf, unique, worker, type ProviderRequest, type View } from "../support.ts";

const A = "keeper";
const ADMIN = { authorization: "Bearer test-admin-token", "content-type": "application/json" };

const userTexts = (request: ProviderRequest) => request.body.messages.filter((m) => m.role === "user").map((m) => m.content as string);
const toolTexts = (view: View) => view.transcript.filter((e) => e.role === "tool").map((e) => e.text);

async function turn(tenant: string, conversation: string, text: string, agent = A): Promise<View> {
  await postMessage(tenant, agent, { text, conversation });
  return settled(tenant, agent, conversation);
}

const remember = (text: string, alias = "memory") => ({ toolCalls: [{ name: `${alias}__remember`, arguments: { text } }] });

describe("memory scopes", () => {
  it("a DM note reaches that person's next DM conversation and never a channel; a channel note reaches the channels and no DM", async () => {
    const team = slackId("T");
    const ana = { dm: slackId("D"), user: "UANA" };
    const bob = { dm: slackId("D"), user: "UBOB" };
    const general = { channel: slackId("C"), user: "UANA" };
    const random = { channel: slackId("C"), user: "UBOB" };

    const inDm = unique("dm");
    await script(inDm, [remember("Ana's locker code is 4512."), { text: "Noted." }]);
    await slack(team, ana, `[s:${inDm}] remember my locker code, 4512`);
    const inChannel = unique("ch");
    await script(inChannel, [remember("The release is on Friday."), { text: "Noted." }]);
    await slack(team, general, `[s:${inChannel}] remember: release on Friday`);

    const anaAgain = await firstPrompt(team, ana);
    expect(anaAgain).toContain("- Ana's locker code is 4512.\n");
    expect(anaAgain).toContain("private to your direct messages with this person");
    expect(anaAgain).not.toContain("The release is on Friday.");
    const bobsDm = await firstPrompt(team, bob);
    expect(bobsDm).not.toContain("4512");
    expect(bobsDm).not.toContain("The release is on Friday.");
    for (const where of [general, random]) {
      const channel = await firstPrompt(team, where);
      expect(channel).toContain("- The release is on Friday.\n");
      expect(channel).not.toContain("4512");
    }
  });

  it("a tenant-wide memory, mounted explicitly, is shared by DMs and channels", async () => {
    const team = slackId("T");
    const mounts = [{ alias: "team", plugin: "memory", config: { scope: "tenant" } }];
    expect((await worker(`/v1/tenants/${team}/agents/assistant/mounts`, { method: "PUT", headers: ADMIN, body: JSON.stringify(mounts) })).status).toBe(200);
    const s = unique("wide");
    await script(s, [remember("Office closes at 6pm.", "team"), { text: "Noted." }]);
    await slack(team, { dm: slackId("D"), user: "UANA" }, `[s:${s}] remember the office hours`);
    const channel = await firstPrompt(team, { channel: slackId("C"), user: "UBOB" });
    expect(channel).toContain('## Memory (mount "team")');
    expect(channel).toContain("shared by every conversation in this workspace");
    expect(channel).toContain("- Office closes at 6pm.\n");
  });
});

describe("the system prompt between compactions", () => {
  it("over 20 turns in which memory changes, every request's system prompt is byte-identical; each change arrives as a note", async () => {
    const T = unique("prefix");
    await script(T, [remember("The Q3 budget is 40k."), { text: "Noted." }]);
    await turn(T, "seed", `[s:${T}] remember the budget`);

    const s = unique("twenty");
    const steps = [];
    for (let n = 1; n <= 20; n++) {
      if (n === 3) steps.push(remember("Standups are at 9:30."));
      steps.push({ text: `Answer ${n}.` });
    }
    steps.push({ text: `## Goal\n[s:${s}] Twenty questions.` }, { text: "Answer 21." });
    await script(s, steps);
    const other = async (id: string, call: unknown) => {
      await script(id, [call as never, { text: "Done." }]);
      await turn(T, id, `[s:${id}] go`);
    };
    for (let n = 1; n <= 20; n++) {
      // Other conversations of the same scope change memory while this one runs.
      if (n === 8) await other(unique("other"), remember("The offsite is in May."));
      if (n === 13) await other(unique("other"), { toolCalls: [{ name: "memory__revise", arguments: { find: "40k", replace: "45k" } }] });
      await turn(T, s, n === 1 ? `[s:${s}] question 1` : `question ${n}`);
    }

    const requests = await providerRequests(s);
    expect(requests).toHaveLength(21);
    const system = systemOf(requests[0]!);
    expect(system).toContain("- The Q3 budget is 40k.\n");
    for (const request of requests) expect(systemOf(request)).toBe(system);
    for (let i = 1; i < requests.length; i++) {
      const before = requests[i - 1]!.body.messages;
      expect(requests[i]!.body.messages.slice(0, before.length)).toEqual(before);
    }
    // Each change reaches the model once, in the first request of the next turn, after the person's message.
    const noteOf = (request: ProviderRequest) => userTexts(request).at(-1)!;
    const heading = '[runtime note] The notes of mount "memory" changed since this conversation\'s instructions were written (they still show the notes as they were):\n';
    const turnStarts = requests.filter((r) => r.body.messages.at(-1)!.role === "user");
    expect(noteOf(turnStarts[3]!)).toBe(`${heading}+ Standups are at 9:30.`); // its own change of turn 3, at turn 4
    expect(noteOf(turnStarts[7]!)).toBe(`${heading}+ The offsite is in May.`);
    expect(noteOf(turnStarts[12]!)).toBe(`${heading}- The Q3 budget is 40k.\n+ The Q3 budget is 45k.`);
    const notes = requests.at(-1)!.body.messages.filter((m) => String(m.content).startsWith("[runtime note]"));
    expect(notes).toHaveLength(3);

    // A compaction writes the notes down afresh: the next system prompt has them as they are now.
    await postMessage(T, A, { kind: "command", command: "compact", conversation: s });
    await settled(T, A, s);
    await turn(T, s, "question 21");
    const after = systemOf((await providerRequests(s)).at(-1)!);
    expect(after).not.toBe(system);
    for (const line of ["The Q3 budget is 45k.", "Standups are at 9:30.", "The offsite is in May."]) expect(after).toContain(`- ${line}\n`);
  }, 120_000); // twenty-odd turns through the real queue, one after another
});

describe("the memory tools", () => {
  it("remember appends a line; revise and forget change exactly one match, refusing none or several with the matches listed; recall lists", async () => {
    const T = unique("tools");
    const s = unique("tools");
    const call = (name: string, args: unknown) => ({ name: `memory__${name}`, arguments: args });
    await script(s, [
      { toolCalls: [call("remember", { text: "The budget is 40k." }), call("remember", { text: "The budget owner\nis Ana." }), call("remember", { text: "The deadline is Friday." }), call("remember", { text: "The budget is 40k." })] },
      {
        toolCalls: [
          call("revise", { find: "budget", replace: "plan" }),
          call("revise", { find: "Monday", replace: "Tuesday" }),
          call("revise", { find: "40k", replace: "45k" }),
          call("forget", { text: "deadline" }),
          call("recall", {}),
          call("recall", { phrase: "ANA" }),
        ],
      },
      { text: "Done." },
    ]);
    const view = await turn(T, s, `[s:${s}] tidy up`);
    expect(toolTexts(view)).toEqual([
      'Remembered: "The budget is 40k.".',
      'Remembered: "The budget owner is Ana.".',
      'Remembered: "The deadline is Friday.".',
      'Already remembered: "The budget is 40k.".',
      '"budget" occurs 2 times; nothing was revised. Quote more of the note so that it matches once:\n1. The budget is 40k.\n2. The budget owner is Ana.',
      'No note contains "Monday"; nothing was revised. Use recall to see the notes.',
      'Revised: "The budget is 40k." is now "The budget is 45k.".',
      'Forgot "The deadline is Friday.".',
      "1. The budget is 45k.\n2. The budget owner is Ana.",
      "2. The budget owner is Ana.",
    ]);
    expect(view.transcript.filter((e) => e.role === "tool").map((e) => e.isError)).toEqual([false, false, false, false, true, true, false, false, false, false]);
  });

  it("past 8,000 characters the oldest notes are shown by their first and last line, around a marker naming recall", () => {
    const lines = Array.from({ length: 200 }, (_, i) => `note ${String(i + 1).padStart(3, "0")} ${"x".repeat(90)}`);
    const shown = renderMemory(lines, "memory");
    expect(shown.length).toBeLessThanOrEqual(8_000);
    const out = shown.trimEnd().split("\n");
    expect(out[0]).toBe(`- ${lines[0]}`);
    const omitted = Number(/^\[… (\d+) older notes not shown: memory__recall lists every note …\]$/.exec(out[1]!)![1]);
    expect(out[2]).toBe(`- ${lines[omitted + 1]}`);
    expect(out.slice(3)).toEqual(lines.slice(omitted + 2).map((l) => `- ${l}`));
    expect(out.at(-1)).toBe(`- ${lines[199]}`);
    expect(renderMemory(lines.slice(0, 10), "memory")).toBe(lines.slice(0, 10).map((l) => `- ${l}\n`).join(""));
  });

  it("parallel writes from two conversations lose nothing", async () => {
    const T = unique("parallel");
    const batch = (who: string) => ({ toolCalls: Array.from({ length: 5 }, (_, i) => ({ name: "memory__remember", arguments: { text: `${who} note ${i}` } })) });
    const [p, q] = [unique("p"), unique("q")];
    await script(p, [batch("p"), { text: "Done." }]);
    await script(q, [batch("q"), { text: "Done." }]);
    await Promise.all([postMessage(T, A, { text: `[s:${p}] go`, conversation: p }), postMessage(T, A, { text: `[s:${q}] go`, conversation: q })]);
    await Promise.all([settled(T, A, p), settled(T, A, q)]);
    const [doc] = await rows<{ value: string }>(T, A, "SELECT value FROM mount_sessions WHERE alias = 'memory' AND key = 'doc:channels'");
    expect((JSON.parse(doc!.value) as string[]).toSorted()).toEqual([...batch("p").toolCalls, ...batch("q").toolCalls].map((c) => c.arguments.text).toSorted());
  });

  it("notes survive an eviction; another agent of the tenant has none", async () => {
    const T = unique("evict");
    const [first, second, stranger] = [unique("m"), unique("m"), unique("m")];
    await script(first, [remember("The Q3 budget is 40k."), { text: "Noted." }]);
    await script(second, [{ toolCalls: [{ name: "memory__recall", arguments: { phrase: "budget" } }] }, { text: "It is 40k." }]);
    await script(stranger, [{ toolCalls: [{ name: "memory__recall", arguments: {} }] }, { text: "Nothing." }]);
    await turn(T, first, `[s:${first}] remember the budget`);
    await evict(T, A);
    expect(toolTexts(await turn(T, second, `[s:${second}] what was the budget?`))).toEqual(["1. The Q3 budget is 40k."]);
    expect(systemOf((await providerRequests(second))[0]!)).toContain("- The Q3 budget is 40k.\n");
    expect(toolTexts(await turn(T, stranger, `[s:${stranger}] what do you remember?`, "stranger"))).toEqual(["No notes yet."]);
  });
});

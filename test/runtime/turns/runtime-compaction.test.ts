// Compaction, seen from the fake provider's recorded requests: the four
// triggers (a share of the window, a share of the output budget, the provider
// refusing a request as too long in its own API's wording, a person), the
// handover that replaces everything before a kept tail, the merge of a second
// compaction into the first handover, append-only requests between
// compactions, and a log that keeps every message. The fake provider's models
// have an 8,000-token window.
import { beforeAll, describe, expect, it } from "vitest";
import { rows } from "../../agents.ts";
import { chooseModels, postMessage, providerRequests, releaseProvider, script, settled, unique, waitFor, type ProviderRequest, type ScriptStep, type View } from "../../support.ts";

const A = "scribe";
const WINDOW = 8000;

/** One tenant per model: a small output budget (the window share triggers first), a large one, and one per API. */
const tenantModels: Record<string, string> = {
  "compact-small": "fake/small-output",
  "compact-big": "fake/big-output",
  "overflow-completions": "fake/test-model",
  "overflow-responses": "fake-responses/gpt-4.1-mini",
  "overflow-anthropic": "fake-anthropic/claude-sonnet-4-5",
  "overflow-gemini": "fake-gemini/gemini-2.5-flash",
  // OpenAI's error code alone, in a wording no pattern knows.
  "overflow-code": "fake/test-model",
  // Thirty turns with the tools' signatures in every request outgrow the 8,000-token window.
  "cache-stable": "fake/long-context",
};

beforeAll(() => chooseModels(tenantModels));

type Part = { type?: string; text?: string };
const textOf = (content: unknown): string =>
  typeof content === "string" ? content : Array.isArray(content) ? (content as Part[]).map((p) => (p.type === undefined || /text/.test(p.type) ? (p.text ?? "") : "")).join("") : "";

/** The texts of a request's messages after the system prompt, whatever the API (assistant turns included). */
function texts(request: ProviderRequest): string[] {
  const body = request.body as Record<string, any>;
  switch (request.api) {
    case "openai-responses":
      return (body.input as any[]).filter((i) => i.role === "user" || i.role === "assistant").map((i) => textOf(i.content));
    case "google-generative-ai":
      return (body.contents as any[]).map((c) => textOf(c.parts));
    default:
      return (body.messages as any[]).filter((m) => m.role === "user" || m.role === "assistant").map((m) => textOf(m.content));
  }
}

const isSummary = (request: ProviderRequest) => JSON.stringify(request.body).includes("You write handover notes");

const say = (tenant: string, conversation: string, text: string) => postMessage(tenant, A, { text, conversation });

async function turn(tenant: string, conversation: string, text: string): Promise<View> {
  await say(tenant, conversation, text);
  return settled(tenant, A, conversation);
}

async function command(tenant: string, conversation: string, name: "compact" | "status"): Promise<string> {
  const res = await postMessage(tenant, A, { kind: "command", command: name, conversation });
  expect(res.status).toBe(202);
  return ((await res.json()) as { notice: string }).notice;
}

const compactions = (view: View) => view.transcript.filter((e) => e.role === "compaction") as unknown as { trigger: string; summarised: number; kept: number; text: string }[];

describe("compaction on the way", () => {
  it("a conversation pushed past 75% of the window compacts on its own; the next request is under budget: the handover, then the kept tail", async () => {
    const T = "compact-small";
    const s = unique("window");
    await script(s, [{ text: "Hello." }, { text: "Read it." }, { text: `## Goal\n[s:${s}] Review two long logs.\n## Progress\nBoth logs read.` }, { text: "The second log is fine." }]);
    await turn(T, s, `[s:${s}] hello`);
    // The request without the person's words: sized from what the fake recorded, so the steps below land where they must.
    const base = JSON.stringify((await providerRequests(s))[0]!.body).length;
    const first = `first log: ${"a".repeat(Math.max(1000, 19_200 - base))}`;
    await turn(T, s, first);
    const second = `second log: ${"b".repeat(6_000)}`;
    const view = await turn(T, s, second);

    const requests = await providerRequests(s);
    expect(requests.map(isSummary)).toEqual([false, false, true, false]);
    // Before: under the window share; the third would have been over it.
    expect(JSON.stringify(requests[1]!.body).length / 4).toBeLessThan(0.75 * WINDOW);
    const summary = requests[2]!;
    const shownToSummariser = texts(summary).join("\n");
    expect(shownToSummariser).toContain("[person] first log: aaaa");
    expect(shownToSummariser).toMatch(/characters cut\]/); // 19,000 characters are cut for the summariser
    expect(shownToSummariser).not.toContain("second log"); // the kept tail is not summarised
    for (const section of ["Goal", "Constraints", "Progress", "Decisions", "Open questions", "Next steps"]) expect(JSON.stringify(summary.body)).toContain(section);

    const next = requests[3]!;
    expect(JSON.stringify(next.body).length / 4).toBeLessThan(0.75 * WINDOW);
    expect(texts(next)).toEqual([
      `<handover>\n## Goal\n[s:${s}] Review two long logs.\n\n## Constraints\n(none)\n\n## Progress\nBoth logs read.\n\n## Decisions\n(none)\n\n## Open questions\n(none)\n\n## Next steps\n(none)\n</handover>`,
      "Read it.",
      second,
    ]);
    expect(view.transcript.at(-1)).toMatchObject({ role: "assistant", text: "The second log is fine." });
    expect(compactions(view)).toEqual([expect.objectContaining({ trigger: "window", summarised: 3, kept: 2 })]);

    // Nothing is destroyed: the log still holds every message, the long ones whole.
    const kept = await rows<{ type: string; data: string }>(T, A, "SELECT type, data FROM log WHERE conversation = ? AND type IN ('user', 'assistant') ORDER BY seq", s);
    expect(kept.map((r) => r.type)).toEqual(["user", "assistant", "user", "assistant", "user", "assistant"]);
    expect(kept[2]!.data).toContain(first);
    expect(kept[4]!.data).toContain(second);
    expect(view.transcript.filter((e) => e.role === "user").map((e) => e.text)).toEqual([`[s:${s}] hello`, first, second]);
  });

  it("a request that leaves room for less than half of the output budget compacts, though under 75% of the window", async () => {
    // The provider counted 5,200 tokens for the first request: 65% of the window. The big-output model
    // (maxTokens 6,000) would have 2,800 left of the 3,000 it needs; the small one (500) has plenty.
    const steps = (s: string): ScriptStep[] => [{ text: "Noted.", usage: { input: 5_200 } }, { text: `## Goal\n[s:${s}] Keep going.` }, { text: "Going." }];
    const big = unique("output");
    const small = unique("output");
    await script(big, steps(big));
    await script(small, steps(small));
    for (const [T, s] of [["compact-big", big], ["compact-small", small]] as const) {
      await turn(T, s, `[s:${s}] begin`);
      await turn(T, s, "go on");
    }
    expect((await providerRequests(big)).map(isSummary)).toEqual([false, true, false]);
    expect((await providerRequests(small)).map(isSummary)).toEqual([false, false]);
    expect(compactions(await settled("compact-big", A, big))).toEqual([expect.objectContaining({ trigger: "output" })]);
  });

  it("a summary on the way that fails changes nothing: the turn goes on with the conversation as it was", async () => {
    const s = unique("onway");
    await script(s, [{ text: "Noted.", usage: { input: 5_200 } }, { status: 422, error: "summaries are off today" }, { text: "Went on." }]);
    await turn("compact-big", s, `[s:${s}] begin`);
    const view = await turn("compact-big", s, "go on");
    const requests = await providerRequests(s);
    expect(requests.map(isSummary)).toEqual([false, true, false]);
    expect(texts(requests[2]!)).toEqual([`[s:${s}] begin`, "Noted.", "go on"]);
    expect(view).toMatchObject({ status: "idle", transcript: expect.arrayContaining([expect.objectContaining({ role: "note", text: expect.stringMatching(/^Compaction failed \(/) })]) });
    expect(view.transcript.at(-1)).toMatchObject({ role: "assistant", text: "Went on." });
    expect(compactions(view)).toEqual([]);
  });
});

/** Each API's own words for a request too long for the model. */
const TOO_LONG: { tenant: string; step: ScriptStep }[] = [
  {
    tenant: "overflow-completions",
    step: {
      status: 400,
      code: "context_length_exceeded",
      error: "This model's maximum context length is 8000 tokens. However, your messages resulted in 9120 tokens. Please reduce the length of the messages.",
    },
  },
  { tenant: "overflow-responses", step: { status: 400, code: "context_length_exceeded", error: "Your input exceeds the context window of this model. Please adjust your input and try again." } },
  { tenant: "overflow-anthropic", step: { status: 400, error: "prompt is too long: 213462 tokens > 200000 maximum" } },
  { tenant: "overflow-gemini", step: { status: 400, error: "The input token count (1196265) exceeds the maximum number of tokens allowed (1048575)." } },
  { tenant: "overflow-code", step: { status: 400, code: "context_length_exceeded", error: "Request rejected: shorten your conversation and try once more." } },
];

describe("the provider refusing a request as too long", () => {
  for (const { tenant, step } of TOO_LONG) {
    it(`${tenant.replace("overflow-", "")}: one compaction, then the call succeeds`, async () => {
      const s = unique("long");
      await script(s, [{ text: "First answer." }, step, { text: `## Goal\n[s:${s}] Answer two questions.` }, { text: "Second answer." }]);
      await turn(tenant, s, `[s:${s}] first question`);
      const view = await turn(tenant, s, "second question");

      expect(view.status).toBe("idle");
      expect(view.transcript.at(-1)).toMatchObject({ role: "assistant", text: "Second answer." });
      const requests = await providerRequests(s);
      expect(requests.map(isSummary)).toEqual([false, false, true, false]);
      expect(texts(requests.at(-1)!)[0]).toMatch(/^<handover>\n## Goal\n\[s:\w+\] Answer two questions\./);
      expect(compactions(view)).toEqual([expect.objectContaining({ trigger: "refused" })]);
      expect(view.transcript.find((e) => e.role === "note")!.text).toMatch(/^The model provider refused the request as too long for the model/);
    });
  }

  it("refused again after the compaction: the turn fails once, with no further call", async () => {
    const T = "overflow-completions";
    const s = unique("again");
    const { step } = TOO_LONG[0]!;
    await script(s, [{ text: "First answer." }, step, { text: `## Goal\n[s:${s}] Too much.` }, step, { text: "never asked" }]);
    await turn(T, s, `[s:${s}] first question`);
    const view = await turn(T, s, "second question");
    expect(view.status).toBe("failed");
    expect(view.error).toMatch(/^the conversation is too long for the model even after compaction \(the request is too long for the model \(400 This model's maximum context length/);
    expect((await providerRequests(s)).map(isSummary)).toEqual([false, false, true, false]);
  });

  it("a first message too long on its own: nothing to summarise, so the turn fails at once", async () => {
    const T = "overflow-completions";
    const s = unique("alone");
    await script(s, [TOO_LONG[0]!.step, { text: "never asked" }]);
    const view = await turn(T, s, `[s:${s}] one huge question`);
    expect(view.status).toBe("failed");
    expect(view.error).toMatch(/^the latest messages alone are too long for the model/);
    expect(await providerRequests(s)).toHaveLength(1);
  });

  it("a summary call that fails leaves the conversation as it was", async () => {
    const T = "overflow-completions";
    const s = unique("nosum");
    await script(s, [{ text: "First answer." }, { text: "Second answer." }, { status: 422, error: "summaries are off today" }, { text: "Third answer." }]);
    await turn(T, s, `[s:${s}] first question`);
    await turn(T, s, "second question");
    const before = await providerRequests(s);
    expect(await command(T, s, "compact")).toBe("Compacting: the earlier messages are summarised into a handover; the latest stay as they are.");
    const view = await settled(T, A, s);
    expect(view.status).toBe("idle");
    expect(view.transcript.at(-1)!.text).toMatch(/^Compaction failed \(the model provider refused the request \(422 summaries are off today\)\); the conversation is as it was\.$/);
    await turn(T, s, "third question");
    const after = (await providerRequests(s)).at(-1)!;
    // The next request is the last one before the failed summary, plus the new messages.
    expect(texts(after)).toEqual([...texts(before.at(-1)!), "Second answer.", "third question"]);
  });
});

describe("a person's compact, twice", () => {
  it("the second summary request carries the first handover and the merge instruction; each handover has the fixed sections", async () => {
    const T = "compact-small";
    const s = unique("twice");
    await script(s, [
      { text: "We ship v2 on Friday." },
      { text: "The plan is drafted." },
      { text: `## Goal\n[s:${s}] Ship v2 on Friday.\n\n## Progress\n- Plan drafted.` }, // no Constraints, Decisions, …
      { text: "Approved." },
      { text: "QA starts Thursday." },
      { text: "**Progress:**\n- Plan approved; QA on Thursday.\n**Decisions:**\n- Ship Friday." }, // another heading style, still no Goal
      { text: "On track." },
    ]);
    await turn(T, s, `[s:${s}] when do we ship v2?`);
    await turn(T, s, "draft the plan");
    await command(T, s, "compact");
    const firstDone = await settled(T, A, s);
    const first = compactions(firstDone)[0]!;
    expect(first).toMatchObject({ trigger: "person" });
    expect(first.text).toBe(`## Goal\n[s:${s}] Ship v2 on Friday.\n\n## Constraints\n(none)\n\n## Progress\n- Plan drafted.\n\n## Decisions\n(none)\n\n## Open questions\n(none)\n\n## Next steps\n(none)`);
    expect(first).toMatchObject({ summarised: 2, kept: 2 });

    await turn(T, s, "approve the plan");
    await turn(T, s, "when does QA start?");
    await command(T, s, "compact");
    const secondDone = await settled(T, A, s);
    const requests = await providerRequests(s);
    const second = requests.filter(isSummary)[1]!;
    const asked = texts(second).join("\n");
    expect(asked).toMatch(/^Below is the handover note written at the previous compaction, then the messages that came after it\. Merge the new messages into that note/);
    expect(asked).toContain(`<previous-handover>\n${first.text}\n</previous-handover>`);
    expect(asked).toContain("[person] approve the plan");
    expect(asked).not.toContain("<handover>"); // the first handover is given to merge into, not as a message

    const merged = compactions(secondDone)[1]!.text;
    expect(merged).toBe(
      `## Goal\n[s:${s}] Ship v2 on Friday.\n\n## Constraints\n(none)\n\n## Progress\n- Plan approved; QA on Thursday.\n\n## Decisions\n- Ship Friday.\n\n## Open questions\n(none)\n\n## Next steps\n(none)`,
    );
    await turn(T, s, "are we on track?");
    const last = texts((await providerRequests(s)).at(-1)!);
    expect(last[0]).toBe(`<handover>\n${merged}\n</handover>`);
    expect(last.filter((t) => t.startsWith("<handover>"))).toHaveLength(1);
  });

  it("is refused while a turn runs, and with nothing to compact", async () => {
    const T = "compact-small";
    const s = unique("none");
    await script(s, [{ hold: true, text: "Done." }]);
    await say(T, s, `[s:${s}] hello`);
    expect(await command(T, s, "compact")).toBe("A turn is running; stop it or wait for it before compacting.");
    await releaseProvider(s);
    await settled(T, A, s);

    const failed = unique("none");
    await script(failed, [{ status: 400, error: "no such thing" }]);
    expect((await turn(T, failed, `[s:${failed}] hello`)).status).toBe("failed");
    expect(await command(T, failed, "compact")).toBe("Nothing to compact yet."); // one message alone
    expect(await command(T, unique("empty"), "compact")).toBe("There is no conversation here yet.");
  });
});

describe("cache-stable requests", () => {
  it("over 30 turns with no compaction, each request is the previous one plus new messages", async () => {
    const T = "cache-stable";
    const s = unique("prefix");
    const steps: ScriptStep[] = [];
    for (let n = 1; n <= 30; n++) {
      if (n % 5 === 0) steps.push({ toolCalls: [{ name: "clock__now", arguments: {} }] });
      steps.push(n === 15 ? { hold: true, text: "Too late." } : { text: `Answer ${n}.` });
    }
    await script(s, steps);
    for (let n = 1; n <= 30; n++) {
      const text = n === 1 ? `[s:${s}] question 1` : `question ${n}`;
      if (n !== 15) {
        await turn(T, s, text);
        continue;
      }
      // Turn 15 is stopped while the model is asked: its late answer is dropped, and a runtime note follows.
      await say(T, s, text);
      await waitFor("the held call", async () => (await providerRequests(s)).length === 18);
      await postMessage(T, A, { kind: "interrupt", conversation: s });
      await releaseProvider(s);
    }

    const requests = await providerRequests(s);
    expect(requests).toHaveLength(36);
    expect(JSON.stringify(requests.at(-1)!.body)).toContain("[runtime note] The person stopped the previous turn.");
    for (let i = 1; i < requests.length; i++) {
      const { messages: before, ...restBefore } = requests[i - 1]!.body;
      const { messages: after, ...restAfter } = requests[i]!.body;
      expect(restAfter).toEqual(restBefore); // tools, model, options
      expect(after.length).toBeGreaterThan(before.length);
      expect(after.slice(0, before.length)).toEqual(before);
    }
  }, 120_000); // thirty turns through the real queue, one after another
});

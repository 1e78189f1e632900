// Invariant 2 and the model queue: the object never calls the provider, a reply
// delivered twice changes nothing, and provider errors are retried until the
// queue gives up (a refusal that fails at once: test/providers.test.ts).
import { runInDurableObject } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { agent, alarmOf, passHoldingJobs, rows, runConsumer } from "./agents.ts";
import { getConversation, postMessage, providerRequests, script, settled, unique } from "./support.ts";

const T = "jobs";
const A = "runner";
const route = { tenant: T, agent: A };

describe("the object never awaits a model call", () => {
  it("a full pass of the object makes no provider request; only the consumer does", async () => {
    // Its own agent: the swapped binding stays on this instance.
    const isolated = { tenant: T, agent: "no-await" };
    const s = unique("noawait");
    await script(s, [{ text: "answered by the consumer" }]);
    const sent = await passHoldingJobs(isolated, s, `[s:${s}] hi`);
    expect(sent).toHaveLength(1);
    expect(await providerRequests(s)).toHaveLength(0);
    expect((await getConversation(isolated.tenant, isolated.agent, s)).status).toBe("waiting_model");
    expect(await alarmOf(isolated.tenant, isolated.agent)).toBeNull(); // waiting for the model costs nothing

    const result = await runConsumer(sent);
    expect(result.explicitAcks).toEqual([`m0-${sent[0]!.jobId}`]);
    expect(await providerRequests(s)).toHaveLength(1);
    await runInDurableObject(agent(isolated.tenant, isolated.agent), (instance) => instance.alarm());
    const view = await settled(isolated.tenant, isolated.agent, s);
    expect(view.transcript.at(-1)).toMatchObject({ role: "assistant", text: "answered by the consumer" });
  });
});

/** A settled one-reply turn and its model job's id. */
async function finishedTurn(prefix: string, reply: string) {
  const s = unique(prefix);
  await script(s, [{ text: reply }]);
  await postMessage(T, A, { text: `[s:${s}] hello`, conversation: s });
  const before = await settled(T, A, s);
  const [job] = await rows<{ id: string }>(T, A, "SELECT id FROM model_jobs WHERE conversation = ?", s);
  return { s, before, jobId: job!.id };
}

describe("one job, one dispatch, one reply", () => {
  it("the same reply delivered twice does not grow the transcript, and a redelivered job makes no provider call", async () => {
    const { s, before, jobId } = await finishedTurn("twice", "only once");

    const reply = { ok: true as const, message: { role: "assistant" as const, content: [{ type: "text" as const, text: "only once" }], api: "x", provider: "x", model: "x", usage: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, totalTokens: 0, cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 } }, stopReason: "stop" as const, timestamp: 0 } };
    expect(await agent(T, A).deliverModelResult(route, jobId, reply)).toBe(false);
    const result = await runConsumer([{ ...route, jobId }]);
    expect(result.explicitAcks).toHaveLength(1);

    expect((await getConversation(T, A, s)).transcript).toEqual(before.transcript);
    expect(await providerRequests(s)).toHaveLength(1);
    expect(await rows(T, A, "SELECT id FROM model_jobs WHERE conversation = ?", s)).toHaveLength(1);
  });
});

describe("provider errors", () => {
  it("429 then success → one reply", async () => {
    const s = unique("r429");
    await script(s, [{ status: 429, error: "Rate limit reached" }, { text: "after the rate limit" }]);
    await postMessage(T, A, { text: `[s:${s}] hi`, conversation: s });
    const view = await settled(T, A, s);
    expect(view.status).toBe("idle");
    expect(view.transcript.filter((e) => e.role === "assistant").map((e) => e.text)).toEqual(["after the rate limit"]);
    expect(await providerRequests(s)).toHaveLength(2);
  });

  it("repeated 500s → dead letter → the turn fails and the person is told", async () => {
    const s = unique("r500");
    await script(s, [{ status: 500, error: "upstream exploded" }]);
    await postMessage(T, A, { text: `[s:${s}] hi`, conversation: s });
    const view = await settled(T, A, s, 25_000);
    expect(view.status).toBe("failed");
    expect(view.error).toMatch(/did not answer after several attempts/);
    // max_retries 3 in wrangler.jsonc: the first try and three retries.
    expect(await providerRequests(s)).toHaveLength(4);
  });
});

describe("a dead-lettered job for a finished turn changes nothing", () => {
  it("is acked and ignored", async () => {
    const { s, before, jobId } = await finishedTurn("dlq", "fine");
    const result = await runConsumer([{ ...route, jobId }], { queue: "antiproton-model-jobs-dlq" });
    expect(result.explicitAcks).toHaveLength(1);
    expect(await getConversation(T, A, s)).toEqual(before);
  });
});

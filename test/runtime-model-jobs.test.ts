// Invariant 2 and the model queue: the object never calls the provider, a reply
// delivered twice changes nothing, and provider errors are retried or not as
// their status says.
import { env } from "cloudflare:workers";
import { createExecutionContext, createMessageBatch, getQueueResult, runInDurableObject } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { consumeQueue } from "../runtime/model-consumer.ts";
import type { ModelJobMessage } from "../runtime/model-job.ts";
import { agent, alarmOf, rows } from "./agents.ts";
import { getConversation, postMessage, providerRequests, script, settled, unique, withVars } from "./support.ts";

const T = "jobs";
const A = "runner";
const route = { tenant: T, agent: A };

function runConsumer(messages: ModelJobMessage[], queue = "antiproton-model-jobs") {
  const batch = createMessageBatch(
    queue,
    messages.map((body, i) => ({ id: `m${i}-${body.jobId}`, timestamp: new Date(), attempts: 1, body })),
  );
  const ctx = createExecutionContext();
  return consumeQueue(batch as MessageBatch<unknown>, env).then(() => getQueueResult(batch, ctx));
}

/**
 * Sends "[s:<s>] hi" to an agent and runs its pass. The object and its storage
 * are real; only its queue binding is swapped for one that keeps the message,
 * so the consumer runs when the test says. Returns the queued job messages.
 */
async function queuedJobs(route: { tenant: string; agent: string }, s: string): Promise<ModelJobMessage[]> {
  const sent: ModelJobMessage[] = [];
  await runInDurableObject(agent(route.tenant, route.agent), async (instance) => {
    const capture = { send: async (m: ModelJobMessage) => void sent.push(m) };
    Object.assign(instance, { env: Object.create(env, { MODEL_QUEUE: { value: capture } }) });
    await instance.submit(route, { id: unique("ev"), kind: "message", conversation: s, text: `[s:${s}] hi`, user: { platform: "api", id: "u" } });
    await instance.alarm();
  });
  return sent;
}

describe("the object never awaits a model call", () => {
  it("a full pass of the object makes no provider request; only the consumer does", async () => {
    // Its own agent: the swapped binding stays on this instance.
    const isolated = { tenant: T, agent: "no-await" };
    const s = unique("noawait");
    await script(s, [{ text: "answered by the consumer" }]);
    const sent = await queuedJobs(isolated, s);
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

  it("400 → the turn fails at once with the provider's status and message, no retry", async () => {
    const s = unique("r400");
    await script(s, [{ status: 400, error: "This model's maximum context length is 10 tokens" }, { text: "must never be asked" }]);
    await postMessage(T, A, { text: `[s:${s}] hi`, conversation: s });
    const view = await settled(T, A, s);
    expect(view.status).toBe("failed");
    expect(view.error).toMatch(/400/);
    expect(view.error).toMatch(/maximum context length is 10 tokens/);
    expect(await providerRequests(s)).toHaveLength(1);
    expect(await rows(T, A, "SELECT status FROM model_jobs WHERE conversation = ?", s)).toEqual([{ status: "failed" }]);
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
    const result = await runConsumer([{ ...route, jobId }], "antiproton-model-jobs-dlq");
    expect(result.explicitAcks).toHaveLength(1);
    expect(await getConversation(T, A, s)).toEqual(before);
  });
});

describe("a provider whose secret is not set", () => {
  it("fails the turn at once, naming the secret: no retry, no provider request", async () => {
    const isolated = { tenant: T, agent: "unset-secret" };
    const s = unique("nokey");
    await script(s, [{ text: "never asked" }]);
    const sent = await queuedJobs(isolated, s);
    expect(sent).toHaveLength(1);
    const result = await withVars({ FAKE_PROVIDER_KEY: undefined }, () => runConsumer(sent));
    expect(result.retryMessages).toEqual([]);
    expect(result.explicitAcks).toEqual([`m0-${sent[0]!.jobId}`]);
    expect(await providerRequests(s)).toHaveLength(0);
    await runInDurableObject(agent(isolated.tenant, isolated.agent), (instance) => instance.alarm());
    const view = await settled(isolated.tenant, isolated.agent, s);
    expect(view.status).toBe("failed");
    expect(view.error).toBe("not configured: the Worker secret FAKE_PROVIDER_KEY is not set");
  });
});

describe("a MODEL_PROVIDERS baseUrl that is not a URL", () => {
  it("fails the turn with a configuration error naming MODEL_PROVIDERS and baseUrl", async () => {
    const s = unique("badurl");
    const providers = JSON.stringify([{ id: "fake", baseUrl: "not a url", auth: { secret: "FAKE_PROVIDER_KEY" } }]);
    const view = await withVars({ MODEL_PROVIDERS: providers }, async () => {
      await postMessage(T, "bad-url", { text: `[s:${s}] hi`, conversation: s });
      return settled(T, "bad-url", s);
    });
    expect(view.status).toBe("failed");
    expect(view.error).toMatch(/^configuration error: MODEL_PROVIDERS is invalid: [\s\S]*baseUrl is not a URL/);
    expect(await providerRequests(s)).toHaveLength(0);
  });
});

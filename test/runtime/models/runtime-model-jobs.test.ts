// Invariant 2 and model jobs: the object never calls the provider (a courier
// does, off the object), an outcome reported twice changes nothing, provider
// errors are retried (a refusal fails at once: test/runtime/models/providers.test.ts), and the hand-offs (queue →
// courier → object) each let go only once the next holder has it.
import { env } from "cloudflare:workers";
import { createExecutionContext, createMessageBatch, getQueueResult, runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { consumeQueue, type Courier, courierStub } from "../../../runtime/courier/index.ts";
import type { AgentObject } from "../../../runtime/object/index.ts";
import { courierName, type EffectMessage } from "../../../runtime/effects/index.ts";
import { agent, alarmOf, noCouriers, rows } from "../../agents.ts";
import { chooseModels, getConversation, postMessage, providerRequests, releaseProvider, script, settled, unique, waitFor, withVars } from "../../support.ts";

const T = "jobs";
const A = "runner";
const route = { tenant: T, agent: A };

function runConsumer(messages: EffectMessage[], queue = "antiproton-effects", bindings: Partial<Env> = {}) {
  const batch = createMessageBatch(
    queue,
    messages.map((body, i) => ({ id: `m${i}-${body.id}`, timestamp: new Date(), attempts: 1, body })),
  );
  const ctx = createExecutionContext();
  return consumeQueue(batch as MessageBatch<unknown>, { ...env, ...bindings } as Env).then(() => getQueueResult(batch, ctx));
}

type AgentStub = DurableObjectStub<AgentObject>;

/** The courier reaches the real agent, but its reports go through `report` (given the real stub and the report's arguments). */
function reportsThrough(courier: DurableObjectStub<Courier>, report: (real: AgentStub, args: Parameters<AgentStub["report"]>) => Promise<unknown>): Promise<void> {
  return runInDurableObject(courier, (instance) => {
    const agents = env.AGENT;
    const through = {
      idFromName: (name: string) => agents.idFromName(name),
      get: (id: DurableObjectId) => {
        const real = agents.get(id);
        return {
          claim: (...args: Parameters<typeof real.claim>) => real.claim(...args),
          progress: (...args: Parameters<typeof real.progress>) => real.progress(...args),
          report: (...args: Parameters<typeof real.report>) => report(real, args),
        };
      },
    };
    Object.assign(instance, { env: Object.create(env, { AGENT: { value: through } }) });
  });
}

const modelEffect = (jobId: string, r = route): EffectMessage => ({ ...r, kind: "model", id: jobId, lane: `model:${jobId.split(":")[0]}`, attempt: 1 });

describe("the object never awaits a model call", () => {
  it("a full pass of the object makes no provider request; only the courier does", async () => {
    // Its own agent: the swapped binding stays on this instance.
    const isolated = { tenant: T, agent: "no-await" };
    const s = unique("noawait");
    await script(s, [{ text: "answered by the courier" }]);
    const sent: EffectMessage[] = [];
    // The object and its storage are real; only its queue binding is swapped
    // for one that keeps the messages, so the consumer runs when the test says.
    await runInDurableObject(agent(isolated.tenant, isolated.agent), async (instance) => {
      const capture = { sendBatch: async (batch: MessageSendRequest<EffectMessage>[]) => void sent.push(...batch.map((m) => m.body)) };
      Object.assign(instance, { env: Object.create(env, { EFFECT_QUEUE: { value: capture }, COURIER: { value: noCouriers } }) });
      await instance.submit(isolated, { id: unique("ev"), kind: "message", conversation: s, text: `[s:${s}] hi`, user: { platform: "api", id: "u" } });
      await instance.alarm();
    });
    expect(sent).toHaveLength(1);
    expect(sent[0]).toMatchObject({ kind: "model" });
    expect(await providerRequests(s)).toHaveLength(0);
    expect((await getConversation(isolated.tenant, isolated.agent, s)).status).toBe("waiting_model");
    // Waiting for the model, the object's only alarm is the lease on the job it sent.
    const lease = await alarmOf(isolated.tenant, isolated.agent);
    expect(lease).toBeGreaterThan(Date.now() + 10_000);

    const result = await runConsumer(sent);
    expect(result.explicitAcks).toEqual([`m0-${sent[0]!.id}`]);
    const view = await settled(isolated.tenant, isolated.agent, s);
    expect(view.transcript.at(-1)).toMatchObject({ role: "assistant", text: "answered by the courier" });
    expect(await providerRequests(s)).toHaveLength(1);
    await waitFor("the object to be idle", async () => (await alarmOf(isolated.tenant, isolated.agent)) === null);
  });

  it("a turn's effects go straight to their couriers: the queue carries none of them", async () => {
    const direct = { tenant: T, agent: "hand-off" };
    const s = unique("handoff");
    await script(s, [{ text: "no queue between" }]);
    const queued: EffectMessage[] = [];
    await runInDurableObject(agent(direct.tenant, direct.agent), async (instance) => {
      const sendBatch = (batch: MessageSendRequest<EffectMessage>[]) => (queued.push(...batch.map((m) => m.body)), env.EFFECT_QUEUE.sendBatch(batch));
      Object.assign(instance, { env: Object.create(env, { EFFECT_QUEUE: { value: { sendBatch } } }) });
      await instance.submit(direct, { id: unique("ev"), kind: "message", conversation: s, text: `[s:${s}] hi`, user: { platform: "api", id: "u" } });
    });
    const view = await settled(direct.tenant, direct.agent, s);
    expect(view.transcript.at(-1)).toMatchObject({ role: "assistant", text: "no queue between" });
    expect(await providerRequests(s)).toHaveLength(1);
    expect(queued).toEqual([]);
  });

  it("the queue consumer acks an effect only once its courier has it", async () => {
    const broken = { idFromName: () => ({}), get: () => ({ take: async () => Promise.reject(new Error("courier unreachable")) }) };
    const result = await runConsumer([modelEffect(`${unique("c")}:1:x:chat`)], "antiproton-effects", { COURIER: broken as never });
    expect(result.explicitAcks).toEqual([]);
    expect(result.retryMessages).toHaveLength(1);
  });

  it("a courier that never answers its hand-off is left to the queue's retry, and the batch's others are acked", async () => {
    const hung = `${unique("c")}:1:x:chat`;
    const taken: string[] = [];
    const courier = (id: string) => ({ take: async (effects: EffectMessage[]) => (effects.some((e) => e.id === hung) ? new Promise<void>(() => {}) : void taken.push(...effects.map((e) => e.id))), id });
    const namespace = { idFromName: (name: string) => name, get: (name: string) => courier(name) };
    // The other effect's lane goes to another courier: one courier's effects are handed over together.
    let fine: string;
    do fine = `${unique("c")}:1:x:chat`;
    while (courierName(modelEffect(fine)) === courierName(modelEffect(hung)));
    const result = await runConsumer([modelEffect(hung), modelEffect(fine)], "antiproton-effects", { COURIER: namespace as never });
    expect(taken).toEqual([fine]);
    expect(result.explicitAcks).toEqual([`m1-${fine}`]);
    expect(result.retryMessages.map((m: { msgId: string }) => m.msgId)).toEqual([`m0-${hung}`]);
  }, 30_000);
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

describe("one job, one provider call, one reply", () => {
  it("the same reply reported twice does not grow the transcript, and an effect sent again makes no provider call", async () => {
    const { s, before, jobId } = await finishedTurn("twice", "only once");

    const reply = { kind: "reply" as const, message: { role: "assistant" as const, content: [{ type: "text" as const, text: "only once" }], api: "x", provider: "x", model: "x", usage: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, totalTokens: 0, cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 } }, stopReason: "stop" as const, timestamp: 0 } };
    expect(await agent(T, A).report(route, "model", jobId, { call: reply })).toMatchObject({ taken: false });
    const result = await runConsumer([modelEffect(jobId)]);
    expect(result.explicitAcks).toHaveLength(1);
    await waitFor("the courier to be done", async () => (await runInDurableObject(courierStub(env, modelEffect(jobId)), (_i, state) => state.storage.getAlarm())) === null);

    expect((await getConversation(T, A, s)).transcript).toEqual(before.transcript);
    expect(await providerRequests(s)).toHaveLength(1);
    expect(await rows(T, A, "SELECT id FROM model_jobs WHERE conversation = ?", s)).toHaveLength(1);
  });

  it("a courier evicted mid-call keeps its task: its alarm makes the call again and the reply lands once", async () => {
    const s = unique("courier");
    await script(s, [{ hold: true, text: "after the courier restarted" }, { text: "after the courier restarted" }]);
    await postMessage(T, A, { text: `[s:${s}] hi`, conversation: s });
    await waitFor("the provider to be asked", async () => (await providerRequests(s)).length === 1);
    const [job] = await rows<{ id: string }>(T, A, "SELECT id FROM model_jobs WHERE conversation = ?", s);
    const courier = courierStub(env, modelEffect(job!.id));
    await runInDurableObject(courier, (_i, state) => state.abort("evicted by the test")).catch(() => undefined);
    // The held call's answer goes to a courier instance that no longer exists; its watchdog alarm asks again.
    await releaseProvider(s);
    expect(await runDurableObjectAlarm(courierStub(env, modelEffect(job!.id)))).toBe(true);
    const view = await settled(T, A, s);
    expect(view.transcript.filter((e) => e.role === "assistant").map((e) => e.text)).toEqual(["after the courier restarted"]);
    expect(await providerRequests(s)).toHaveLength(2);
  });
});

describe("a courier works its lanes side by side", () => {
  it("a held model call of one conversation does not hold up another conversation whose lanes share its courier", async () => {
    const slow = unique("slow");
    const courierOf = (conversation: string) => courierStub(env, { ...route, lane: `model:${conversation}` }).id;
    // A conversation whose model lane hashes to the same courier as the slow one's.
    let quick = unique("quick");
    while (!courierOf(quick).equals(courierOf(slow))) quick = unique("quick");
    await script(slow, [{ hold: true, text: "slow answer" }]);
    await script(quick, [{ text: "quick answer" }]);
    await postMessage(T, A, { text: `[s:${slow}] hi`, conversation: slow });
    await waitFor("the slow call to be asked", async () => (await providerRequests(slow)).length === 1);
    await postMessage(T, A, { text: `[s:${quick}] hi`, conversation: quick });
    const view = await settled(T, A, quick);
    expect(view.transcript.at(-1)).toMatchObject({ role: "assistant", text: "quick answer" });
    expect((await getConversation(T, A, slow)).status).toBe("waiting_model");
    await releaseProvider(slow);
    expect((await settled(T, A, slow)).transcript.at(-1)).toMatchObject({ role: "assistant", text: "slow answer" });
  });
});

describe("an outcome in hand is kept until the object takes it", () => {
  it("a report lost on its way back is made again from the kept outcome: the provider is asked once", async () => {
    const s = unique("kept");
    await script(s, [{ hold: true, text: "answered once" }, { text: "asked twice" }]);
    await postMessage(T, A, { text: `[s:${s}] hi`, conversation: s });
    await waitFor("the provider to be asked", async () => (await providerRequests(s)).length === 1);
    const [job] = await rows<{ id: string }>(T, A, "SELECT id FROM model_jobs WHERE conversation = ?", s);
    // The courier's next report to the agent is lost on its way (the object never hears it).
    let lost = 0;
    await reportsThrough(courierStub(env, modelEffect(job!.id)), (real, args) => (lost++ === 0 ? Promise.reject(new Error("lost on its way")) : real.report(...args)));
    await releaseProvider(s);
    await waitFor("the report to be lost", async () => lost > 0);
    expect(await runDurableObjectAlarm(courierStub(env, modelEffect(job!.id)))).toBe(true);
    const view = await settled(T, A, s);
    expect(view.transcript.filter((e) => e.role === "assistant").map((e) => e.text)).toEqual(["answered once"]);
    expect(await providerRequests(s)).toHaveLength(1);
  });

  it("a retry the object sends while the courier still waits for its report's answer is new work, not a copy it ignores", async () => {
    const s = unique("retryrace");
    await script(s, [{ status: 500, error: "upstream exploded" }, { text: "answered after the retry" }]);
    // The answer to the courier's first report is held back: the object has the outcome (and sends the retry at once:
    // no backoff in tests) while the courier has not heard back.
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    let reports = 0;
    await reportsThrough(courierStub(env, { ...route, lane: `model:${s}` }), async (real, args) => {
      const answer = await real.report(...args);
      if (reports++ === 0) await held;
      return answer;
    });
    await postMessage(T, A, { text: `[s:${s}] hi`, conversation: s });
    await waitFor("the object to send the retry", async () => (await rows<{ attempts: number }>(T, A, "SELECT attempts FROM effects WHERE kind = 'model' AND conversation = ?", s))[0]?.attempts === 2);
    release();
    const view = await settled(T, A, s);
    expect(view.transcript.at(-1)).toMatchObject({ role: "assistant", text: "answered after the retry" });
    expect(await providerRequests(s)).toHaveLength(2);
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

  it("repeated 500s → three retries → the turn fails and the person is told", async () => {
    const s = unique("r500");
    await script(s, [{ status: 500, error: "upstream exploded" }]);
    await postMessage(T, A, { text: `[s:${s}] hi`, conversation: s });
    const view = await settled(T, A, s, 25_000);
    expect(view.status).toBe("failed");
    expect(view.error).toMatch(/did not answer after 4 attempts/);
    // The first try and three retries.
    expect(await providerRequests(s)).toHaveLength(4);
    expect(await rows(T, A, "SELECT kind FROM effects WHERE conversation = ?", s)).toEqual([]);
  });
});

describe("leases", () => {
  it("an effect lost on its way to a courier is sent again when its lease runs out, with the same id", async () => {
    const lost = { tenant: T, agent: "lease" };
    const s = unique("lease");
    await script(s, [{ text: "answered after the lease" }]);
    const sent: EffectMessage[] = [];
    const stub = agent(lost.tenant, lost.agent);
    await runInDurableObject(stub, async (instance) => {
      // The first send is lost (as a local queue loses its messages when the process dies).
      const capture = { sendBatch: async (batch: MessageSendRequest<EffectMessage>[]) => void sent.push(...batch.map((m) => m.body)) };
      Object.assign(instance, { env: Object.create(env, { EFFECT_QUEUE: { value: capture }, COURIER: { value: noCouriers } }) });
      await instance.submit(lost, { id: unique("ev"), kind: "message", conversation: s, text: `[s:${s}] hi`, user: { platform: "api", id: "u" } });
      await instance.alarm();
      Object.assign(instance, { env });
    });
    expect(sent).toHaveLength(1);
    // The lease runs out (moved into the past here); the alarm sends it again.
    await runInDurableObject(stub, (_i, state) => state.storage.sql.exec("UPDATE effects SET due_at = ?", Date.now() - 1));
    await runDurableObjectAlarm(stub);
    const view = await settled(lost.tenant, lost.agent, s);
    expect(view.transcript.at(-1)).toMatchObject({ role: "assistant", text: "answered after the lease" });
    const [job] = await rows<{ id: string }>(lost.tenant, lost.agent, "SELECT id FROM model_jobs WHERE conversation = ?", s);
    expect(job!.id).toBe(sent[0]!.id);
  });

  it("a lease that runs out is no failure: the job is sent again until the deadline; past it the turn fails with a sentence the person sees, and nothing stays armed", async () => {
    const lost = { tenant: T, agent: "lease-out" };
    const s = unique("leaseout");
    await script(s, [{ text: "never asked" }]);
    const stub = agent(lost.tenant, lost.agent);
    const sends = await runInDurableObject(stub, async (instance, state) => {
      // Every send is lost.
      let sent = 0;
      Object.assign(instance, { env: Object.create(env, { EFFECT_QUEUE: { value: { sendBatch: async (batch: unknown[]) => void (sent += batch.length) } }, COURIER: { value: noCouriers } }) });
      await instance.submit(lost, { id: unique("ev"), kind: "message", conversation: s, text: `[s:${s}] hi`, user: { platform: "api", id: "u" } });
      await instance.alarm();
      for (let lease = 0; lease < 5; lease++) {
        state.storage.sql.exec("UPDATE effects SET due_at = ?", Date.now() - 1);
        await instance.alarm();
      }
      expect((await instance.conversation(lost, s))!.status).toBe("waiting_model");
      // The deadline (EFFECT_DEADLINE_MINUTES) since the first send has passed.
      state.storage.sql.exec("UPDATE effects SET due_at = ?, first_sent_at = ?", Date.now() - 1, Date.now() - 121 * 60_000);
      await instance.alarm();
      return sent;
    });
    expect(sends).toBe(6);
    const view = await getConversation(lost.tenant, lost.agent, s);
    expect(view.status).toBe("failed");
    expect(view.error).toMatch(/did not answer in time/);
    expect(await providerRequests(s)).toHaveLength(0);
    expect(await rows(lost.tenant, lost.agent, "SELECT kind FROM effects")).toEqual([]);
    expect(await alarmOf(lost.tenant, lost.agent)).toBeNull();
  });
});

describe("a provider whose secret is not set", () => {
  it("fails the turn at once, naming the secret: no retry, no provider request", async () => {
    const s = unique("nokey");
    await script(s, [{ text: "never asked" }]);
    const view = await withVars({ FAKE_PROVIDER_KEY: undefined }, async () => {
      await postMessage(T, "unset-secret", { text: `[s:${s}] hi`, conversation: s });
      return settled(T, "unset-secret", s);
    });
    expect(view.status).toBe("failed");
    expect(view.error).toBe("not configured: the Worker secret FAKE_PROVIDER_KEY named by provider fake is not set");
    expect(await providerRequests(s)).toHaveLength(0);
    expect(await rows(T, "unset-secret", "SELECT retries FROM effects")).toEqual([]);
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

describe("a dead-lettered effect changes nothing", () => {
  it("is acked and only logged (the object's lease sends it again if it is still wanted)", async () => {
    const { s, before, jobId } = await finishedTurn("dlq", "fine");
    const result = await runConsumer([modelEffect(jobId)], "antiproton-effects-dlq");
    expect(result.explicitAcks).toHaveLength(1);
    expect(await getConversation(T, A, s)).toEqual(before);
  });
});

describe("a model request over 1 MiB", () => {
  it("is kept in R2 and read back whole for the provider", async () => {
    // A model whose window holds it: in a smaller one the conversation is compacted instead.
    const LONG = "jobs-long";
    await chooseModels({ [LONG]: "fake/long-context" });
    const s = unique("large");
    await script(s, [{ hold: true, text: "first" }, { text: "read it all" }]);
    await postMessage(LONG, A, { text: `[s:${s}] start`, conversation: s });
    await waitFor("the provider to be asked", async () => (await providerRequests(s)).length === 1);
    // Forty 30 KB steers in the same turn make its next request well over 1 MiB.
    const big = "x".repeat(30_000);
    for (let i = 0; i < 40; i++) await postMessage(LONG, A, { text: `${i}:${big}`, conversation: s });
    await releaseProvider(s);
    await waitFor("the spilled job", async () => (await rows(LONG, A, "SELECT 1 FROM model_jobs WHERE conversation = ? AND large_key IS NOT NULL", s)).length === 1);
    await settled(LONG, A, s);
    const requests = await providerRequests(s);
    expect(requests).toHaveLength(2);
    const text = JSON.stringify(requests[1]!.body.messages);
    expect(text.length).toBeGreaterThan(1 << 20);
    expect(text).toContain(`39:${big.slice(0, 100)}`);
  });
});

// Invariants 1, 3 and 8: a message accepted is never lost, whatever step the
// object is evicted at; a non-idempotent write is never performed twice; an
// idle object has nothing armed.
import { describe, expect, it } from "vitest";
import { env } from "cloudflare:workers";
import { createMessageBatch, runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { consumeQueue } from "../../../runtime/courier/index.ts";
import type { EffectMessage } from "../../../runtime/effects/index.ts";
import { agent, alarmOf, courier, couriersThrough, evict, evictCourier, fireAlarm, noCouriers, rows } from "../../agents.ts";
import {
  getConversation,
  holdLedger,
  ledgerAppends,
  ledgerReads,
  postMessage,
  providerRequests,
  releaseLedger,
  releaseProvider,
  script,
  settled,
  unique,
  waitFor,
} from "../../support.ts";

const T = "durable";
const A = "keeper";

async function expectClean(s: string, entry: string) {
  const view = await settled(T, A, s, 25_000);
  expect(view.status).toBe("idle");
  // One user message, the two-call assistant message, two results, one final reply: no duplicates.
  expect(view.transcript.map((e) => e.role)).toEqual(["user", "assistant", "tool", "tool", "assistant"]);
  expect(view.transcript.filter((e) => e.role === "assistant" && e.text === "all done")).toHaveLength(1);
  expect(await ledgerAppends(entry)).toHaveLength(1);
  await waitFor("the alarm to be cleared", async () => (await alarmOf(T, A)) === null);
  expect(await rows(T, A, "SELECT id FROM model_jobs WHERE status = 'pending'")).toEqual([]);
  return view;
}

async function twoToolTurn(holdFirstCall: boolean) {
  const s = unique("evict");
  const entry = unique("entry");
  await script(s, [
    { hold: holdFirstCall, toolCalls: [{ name: "ledger__read", arguments: { entry } }, { name: "ledger__append", arguments: { entry } }] },
    { text: "all done" },
  ]);
  const res = await postMessage(T, A, { text: `[s:${s}] record ${entry}`, conversation: s });
  expect(res.status).toBe(202);
  return { s, entry };
}

describe("eviction at every step boundary of a two-tool-call turn", () => {
  it("after accept, before any model call: the turn still completes, the message is there once", async () => {
    const { s, entry } = await twoToolTurn(false);
    await evict(T, A);
    await fireAlarm(T, A).catch(() => false);
    const view = await expectClean(s, entry);
    expect(view.transcript.filter((e) => e.role === "user")).toHaveLength(1);
  });

  it("after the job is enqueued (the model call is in flight)", async () => {
    const { s, entry } = await twoToolTurn(true);
    await waitFor("the provider to be asked", async () => (await providerRequests(s)).length === 1);
    await evict(T, A);
    await releaseProvider(s);
    await expectClean(s, entry);
    expect(await providerRequests(s)).toHaveLength(2);
  });

  it("after the reply is delivered", async () => {
    const { s, entry } = await twoToolTurn(false);
    await waitFor("the assistant's tool calls", async () => (await getConversation(T, A, s)).transcript.some((e) => e.role === "assistant"));
    await evict(T, A);
    await fireAlarm(T, A).catch(() => false);
    await expectClean(s, entry);
  });

  it("between tool calls, with the non-idempotent write in flight: it is not performed again", async () => {
    const s = unique("evict");
    const entry = unique("entry");
    await holdLedger("append", entry);
    await script(s, [{ toolCalls: [{ name: "ledger__read", arguments: { entry } }, { name: "ledger__append", arguments: { entry } }] }, { text: "all done" }]);
    await postMessage(T, A, { text: `[s:${s}] record ${entry}`, conversation: s });
    await waitFor("the append to reach the ledger", async () => (await ledgerAppends(entry)).length === 1);
    // The call runs in the tool lane's courier: that is what a crash cuts short.
    const lane = courier(T, A, "tool", s);
    await evictCourier(lane);
    await releaseLedger("append", entry);
    // The courier's watchdog alarm resumes the task it still holds; the object answers the replay.
    expect(await runDurableObjectAlarm(courier(T, A, "tool", s))).toBe(true);
    const view = await expectClean(s, entry);
    const appendResult = view.transcript.filter((e) => e.role === "tool")[1]!;
    expect(appendResult.isError).toBe(true);
    expect(appendResult.text).toMatch(/outcome of ledger__append is unknown/);
  });

  it("a read in flight at eviction is simply performed again", async () => {
    const s = unique("evict");
    const entry = unique("entry");
    await holdLedger("read", entry);
    await script(s, [{ toolCalls: [{ name: "ledger__read", arguments: { entry } }] }, { text: "all done" }]);
    await postMessage(T, A, { text: `[s:${s}] count ${entry}`, conversation: s });
    await waitFor("the read to reach the ledger", async () => (await ledgerReads(entry)).length === 1);
    await evictCourier(courier(T, A, "tool", s));
    await releaseLedger("read", entry);
    expect(await runDurableObjectAlarm(courier(T, A, "tool", s))).toBe(true);
    const view = await settled(T, A, s, 25_000);
    expect(await ledgerReads(entry)).toHaveLength(2);
    const result = view.transcript.find((e) => e.role === "tool")!;
    expect(result).toMatchObject({ isError: false, text: `0 entries for "${entry}"` });
  });
});

describe("a turn stopped while a tool call runs", () => {
  it("performs none of its remaining calls, and the call under way is reported as unknown", async () => {
    const s = unique("stopmid");
    const first = unique("first");
    const second = unique("second");
    await holdLedger("append", first);
    await script(s, [{ toolCalls: [{ name: "ledger__append", arguments: { entry: first } }, { name: "ledger__append", arguments: { entry: second } }] }, { text: "never" }]);
    await postMessage(T, A, { text: `[s:${s}] record both`, conversation: s });
    await waitFor("the first append to reach the ledger", async () => (await ledgerAppends(first)).length === 1);
    await postMessage(T, A, { kind: "interrupt", text: "stop", conversation: s });
    await releaseLedger("append", first);
    const view = await settled(T, A, s);
    await waitFor("the courier to be done", async () => (await rows(T, A, "SELECT kind FROM effects WHERE conversation = ?", s)).length === 0);
    expect(await ledgerAppends(first)).toHaveLength(1);
    expect(await ledgerAppends(second)).toHaveLength(0);
    const results = view.transcript.filter((e) => e.role === "tool").map((e) => e.text);
    expect(results).toEqual(["Interrupted while running: the outcome is unknown.", "Not performed: the turn was stopped."]);
  });
});

describe("a turn stopped while a tool call is on its way to its courier", () => {
  it("never performs the call: the courier's claim is refused", async () => {
    const name = "on-its-way";
    const s = unique("onway");
    const entry = unique("entry");
    await script(s, [{ toolCalls: [{ name: "ledger__append", arguments: { entry } }] }, { text: "never" }]);
    // This instance keeps its tool effects back (a slow hand-off); everything else goes on.
    const held: EffectMessage[] = [];
    await runInDurableObject(agent(T, name), (instance) => {
      const couriers = couriersThrough((effects) => (held.push(...effects.filter((e) => e.kind === "tool")), effects.filter((e) => e.kind !== "tool")));
      Object.assign(instance, { env: Object.create(env, { COURIER: { value: couriers } }) });
    });
    await postMessage(T, name, { text: `[s:${s}] record ${entry}`, conversation: s });
    await waitFor("the tool call on its way", async () => held.length === 1);
    await postMessage(T, name, { kind: "interrupt", conversation: s });
    // Now it arrives.
    const batch = createMessageBatch("antiproton-effects", held.map((body, i) => ({ id: `held${i}`, timestamp: new Date(), attempts: 1, body })));
    await consumeQueue(batch as MessageBatch<unknown>, env);
    await waitFor("the courier to be told no", async () => (await rows(T, name, "SELECT kind FROM effects WHERE conversation = ?", s)).length === 0);
    expect(await ledgerAppends(entry)).toHaveLength(0);
    const view = await settled(T, name, s);
    expect(view.transcript.filter((e) => e.role === "tool").map((e) => e.text)).toEqual(["Not performed: the turn was stopped."]);
  });
});

describe("the pass watchdog", () => {
  it("an eviction mid-pass leaves an alarm that runs the pass again and finishes the turn", async () => {
    const name = "watchdog";
    const route = { tenant: T, agent: name };
    const s = unique("watch");
    await script(s, [{ text: "finished after all" }]);
    await runInDurableObject(agent(T, name), async (instance) => {
      // This instance's pass hangs on its way out (the queue never answers the effects its couriers refused); its alarm fires by itself.
      Object.assign(instance, { env: Object.create(env, { EFFECT_QUEUE: { value: { sendBatch: () => new Promise(() => undefined) } }, COURIER: { value: noCouriers } }) });
      await instance.submit(route, { id: unique("ev"), kind: "message", conversation: s, text: `[s:${s}] hi`, user: { platform: "api", id: "u" } });
    });
    await waitFor("the pass to hang with its watchdog armed", async () => ((await alarmOf(T, name)) ?? 0) > Date.now() + 5_000);
    await evict(T, name);
    expect(await fireAlarm(T, name)).toBe(true);
    const view = await settled(T, name, s);
    expect(view.transcript.at(-1)).toMatchObject({ role: "assistant", text: "finished after all" });
  });
});

describe("idle means nothing armed", () => {
  it("after a turn settles there is no alarm and no open job", async () => {
    const s = unique("idle");
    await script(s, [{ text: "fine" }]);
    await postMessage(T, A, { text: `[s:${s}] hello`, conversation: s });
    await settled(T, A, s);
    await waitFor("the alarm to be cleared", async () => (await alarmOf(T, A)) === null);
    expect(await rows(T, A, "SELECT id FROM model_jobs WHERE status = 'pending'")).toEqual([]);
    expect(await rows(T, A, "SELECT id FROM outbox WHERE status = 'pending'")).toEqual([]);
  });
});

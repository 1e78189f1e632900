// Invariants 1, 3 and 8: a message accepted is never lost, whatever step the
// object is evicted at; a non-idempotent write is never performed twice; an
// idle object has nothing armed.
import { describe, expect, it } from "vitest";
import { alarmOf, evict, fireAlarm, rows } from "./agents.ts";
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
} from "./support.ts";

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
    await evict(T, A);
    await releaseLedger("append", entry);
    // The watchdog alarm armed by the cut-short pass runs it again.
    expect(await fireAlarm(T, A)).toBe(true);
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
    await evict(T, A);
    await releaseLedger("read", entry);
    expect(await fireAlarm(T, A)).toBe(true);
    const view = await settled(T, A, s, 25_000);
    expect(await ledgerReads(entry)).toHaveLength(2);
    const result = view.transcript.find((e) => e.role === "tool")!;
    expect(result).toMatchObject({ isError: false, text: `0 entries for "${entry}"` });
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

// Object busy time, recorded by the runtime itself: every handler of the
// AgentObject (the alarm's pass, each RPC) is measured, per conversation turn
// where it is about one, and per hour for the object as a whole.
import { runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import type { AgentObject } from "../runtime/object/index.ts";
import { getConversation, postMessage, script, settled, unique } from "./support.ts";

interface BusyView {
  busyMs: number;
  busyByTurn: { turn: number; busyMs: number; handlers: number }[];
}

describe("object busy time", () => {
  it("is counted per turn (the turn's own handlers, not a watcher's reads) and per hour", async () => {
    const tenant = unique("busy");
    const s = unique("busy");
    await script(s, [{ toolCalls: [{ name: "clock__now", arguments: {} }] }, { text: "It is now." }, { text: "Second answer." }]);
    await postMessage(tenant, "a", { text: `[s:${s}] time?`, conversation: s });
    await settled(tenant, "a", s);
    await postMessage(tenant, "a", { text: `[s:${s}] again`, conversation: s });
    const view = (await settled(tenant, "a", s)) as unknown as BusyView;

    expect(view.busyByTurn.map((t) => t.turn)).toEqual([1, 2]);
    const [first, second] = view.busyByTurn;
    // Turn 1: the message, two model calls (each reported by its courier) and the passes that advanced it.
    // Turn 2: the message, one model call, its passes. Reads of the conversation add nothing.
    expect(first!.handlers).toBeGreaterThanOrEqual(1 + 2 + 3);
    expect(second!.handlers).toBeGreaterThanOrEqual(1 + 1 + 2);
    expect(first!.handlers).toBeGreaterThan(second!.handlers);
    for (const t of view.busyByTurn) expect(t.busyMs).toBeGreaterThanOrEqual(0);
    expect(view.busyMs).toBeCloseTo(first!.busyMs + second!.busyMs, 1);

    for (let i = 0; i < 3; i++) await getConversation(tenant, "a", s);
    expect(((await getConversation(tenant, "a", s)) as unknown as BusyView).busyByTurn).toEqual(view.busyByTurn);

    // The hour: every pass and RPC counted (the reads too), busy time as the union of their intervals.
    const stub = env.AGENT.get(env.AGENT.idFromName(`${tenant}:a`));
    const hours = await runInDurableObject(stub, (_instance, state) =>
      state.storage.sql.exec<{ busy_ms: number; passes: number; handlers: number }>("SELECT busy_ms, passes, handlers FROM busy_hours").toArray(),
    );
    const passes = hours.reduce((n, h) => n + h.passes, 0);
    const handlers = hours.reduce((n, h) => n + h.handlers, 0);
    expect(passes).toBeGreaterThanOrEqual(4);
    expect(handlers).toBeGreaterThanOrEqual(first!.handlers + second!.handlers + 4);
    expect(hours.reduce((n, h) => n + h.busy_ms, 0)).toBeGreaterThan(0);
  });

  it("counts every call into the object, whatever its handler (a call no attribution names included)", async () => {
    const tenant = unique("calls");
    const s = unique("calls");
    await postMessage(tenant, "a", { text: "hi", conversation: s });
    await settled(tenant, "a", s);
    const stub = env.AGENT.get(env.AGENT.idFromName(`${tenant}:a`)) as DurableObjectStub<AgentObject>;
    const calls = () => runInDurableObject(stub, (_instance, state) => state.storage.sql.exec<{ n: number }>("SELECT COALESCE(SUM(handlers), 0) AS n FROM busy_hours").one().n);
    const before = await calls();
    await stub.dropDeliveries({ tenant, agent: "a" }, "slack", "a test");
    await stub.changes({ tenant, agent: "a" });
    expect(await calls()).toBe(before + 2);
  });
});

// The object's parts on their own, each over a real object's SQLite (a fresh
// object per test, its schema migrated): fast checks of the rules each part
// owns, beside the end-to-end tests that run whole turns.
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import type { ChatOutbound, OutboundMessage, RuntimeDeps } from "../../../runtime/chat.ts";
import { Conversations } from "../../../runtime/store/index.ts";
import { courierName, sendTimeoutMs, Effects, SEND_LEASE_MS, type EffectMessage, type EffectRow, Outbox, type SendRun, Typing, TYPING_REFRESH_MS } from "../../../runtime/effects/index.ts";
import { Inbound, Scheduler } from "../../../runtime/object/index.ts";
import { MountSessions, ToolCalls } from "../../../runtime/tools/index.ts";
import { ModelJobs } from "../../../runtime/models/index.ts";
import { Turns } from "../../../runtime/turns/index.ts";
import { Delegation } from "../../../runtime/turns/index.ts";
import { NO_SETTINGS, SettingsCopy } from "../../../runtime/control/index.ts";
import { Holds } from "../../../approvals/index.ts";
import { inObject, noCouriers } from "../../agents.ts";

const route = { tenant: "parts", agent: "unit" };
const USER = { platform: "api" as const, id: "u" };

/** Carriers whose queue keeps what is sent to it (their couriers take nothing, so every effect goes on the queue). */
function capturingCarriers() {
  const sent: EffectMessage[] = [];
  return { sent, carriers: { couriers: noCouriers, queue: { sendBatch: async (batch: MessageSendRequest<EffectMessage>[]) => void sent.push(...batch.map((m) => m.body)) } as unknown as Queue<EffectMessage> } };
}

describe("Conversations", () => {
  it("a turn marks its conversation for the pass; taking the marks clears them", () =>
    inObject((storage) => {
      const store = new Conversations(storage.sql);
      const conv = store.create("c1", USER, Date.now());
      expect(store.anyMarked()).toBe(false);
      expect(store.beginTurn(conv, { by: USER })).toBe(1);
      expect(store.turnStart(store.get("c1")!).start).toEqual({ by: USER });
      expect(store.takeMarked()).toEqual(["c1"]);
      expect(store.anyMarked()).toBe(false);
      store.markForPass("c1");
      expect(store.takeMarked()).toEqual(["c1"]);
    }));

  it("the inbox gives items back oldest first, and an inbound event id is taken once", () =>
    inObject((storage) => {
      const store = new Conversations(storage.sql);
      store.create("c1", USER, Date.now());
      store.queue("c1", { type: "marker", data: { text: "one" } });
      store.queue("c1", { type: "marker", data: { text: "two" } });
      expect(store.takeFirst("c1")).toEqual({ type: "marker", data: { text: "one" } });
      expect(store.drain("c1")).toEqual([{ type: "marker", data: { text: "two" } }]);
      expect(store.drain("c1")).toEqual([]);
      expect(store.recordInbound("ev1", "c1", "message")).toBe(true);
      expect(store.recordInbound("ev1", "c1", "message")).toBe(false);
    }));
});

describe("Effects", () => {
  const carry = (work: unknown) => () => ({ work });

  it("a waiting effect is sent once per lease, carrying its work; a claim starts its run lease and counts earlier claims", () =>
    inObject(async (storage) => {
      const effects = new Effects(storage.sql, 30_000, 3_600_000);
      const { sent, carriers } = capturingCarriers();
      effects.add("model", "j1", "c1");
      expect(effects.inFlight("model", "j1")).toBe(false);
      expect(await effects.send(carriers, route, carry({ request: "{}" }))).toEqual({ sent: [expect.objectContaining({ kind: "model", id: "j1", conversation: "c1" })], givenUp: [] });
      expect(sent).toEqual([{ ...route, kind: "model", id: "j1", lane: "model:c1", attempt: 1, work: { request: "{}" } }]);
      expect(effects.inFlight("model", "j1")).toBe(true);
      // Not due again until its lease (the queue's and the run's) runs out.
      await effects.send(carriers, route, carry({}));
      expect(sent).toHaveLength(1);
      expect(effects.nextDue()).toBeGreaterThan(Date.now() + 200_000);
      expect(effects.claim("model", "j1")).toEqual({ earlierClaims: 0, attempts: 1 });
      expect(effects.claim("model", "j1")).toEqual({ earlierClaims: 1, attempts: 1 });
      effects.done("model", "j1");
      expect(effects.claim("model", "j1")).toBeNull();
      expect(effects.nextDue()).toBeNull();
    }));

  it("a lease that runs out is no failure: the effect is sent again, same id, next attempt, until the deadline; past it, it is handed back, gone", () =>
    inObject(async (storage) => {
      const effects = new Effects(storage.sql, 30_000, 60_000);
      const { sent, carriers } = capturingCarriers();
      effects.add("send", "7", "c1");
      await effects.send(carriers, route, carry("hi"));
      for (let lease = 1; lease < 6; lease++) {
        storage.sql.exec("UPDATE effects SET due_at = ?", Date.now() - 1);
        expect((await effects.send(carriers, route, carry("hi"))).givenUp).toEqual([]);
      }
      expect(sent.map((m) => [m.id, m.attempt])).toEqual([1, 2, 3, 4, 5, 6].map((n) => ["7", n]));
      storage.sql.exec("UPDATE effects SET due_at = ?, first_sent_at = ?", Date.now() - 1, Date.now() - 60_001);
      const { givenUp } = await effects.send(carriers, route, carry("hi"));
      expect(givenUp.map((e) => [e.kind, e.id])).toEqual([["send", "7"]]);
      expect(effects.get("send", "7")).toBeUndefined();
      expect(sent).toHaveLength(6);
    }));

  it("work too large to travel is left for the courier to claim; an effect no longer wanted ends; batches stay within the queue's size", () =>
    inObject(async (storage) => {
      const effects = new Effects(storage.sql, 30_000, 3_600_000);
      const batches: EffectMessage[][] = [];
      const carriers = { couriers: noCouriers, queue: { sendBatch: async (batch: MessageSendRequest<EffectMessage>[]) => void batches.push(batch.map((m) => m.body)) } as unknown as Queue<EffectMessage> };
      effects.add("model", "huge", "c1");
      effects.add("send", "gone", "c2");
      for (let i = 0; i < 4; i++) effects.add("send", `big${i}`, `c${i + 3}`);
      await effects.send(carriers, route, (row) => (row.id === "gone" ? null : row.id === "huge" ? { work: "x".repeat(200_000) } : { work: "y".repeat(90_000) }));
      const all = batches.flat();
      expect(all.find((m) => m.id === "huge")).toMatchObject({ attempt: 1 });
      expect(all.find((m) => m.id === "huge")!.work).toBeUndefined();
      expect(all.some((m) => m.id === "gone")).toBe(false);
      expect(effects.get("send", "gone")).toBeUndefined();
      expect(all.filter((m) => m.id.startsWith("big")).every((m) => typeof m.work === "string")).toBe(true);
      for (const batch of batches) expect(new TextEncoder().encode(JSON.stringify(batch)).byteLength).toBeLessThan(256 * 1024);
      expect(batches.length).toBeGreaterThan(1);
    }));

  it("a refusal takes its attempt back: the next send has nothing to doubt; an attempt unanswered leaves the doubt", () =>
    inObject(async (storage) => {
      const effects = new Effects(storage.sql, 30_000, 3_600_000);
      const { carriers } = capturingCarriers();
      const inDoubt: boolean[] = [];
      const dispatch = (row: EffectRow) => ({ work: inDoubt.push(row.attempts > 0) });
      effects.add("send", "1", "c1");
      await effects.send(carriers, route, dispatch);
      effects.refused("send", "1");
      effects.retryAt("send", "1", Date.now() - 1);
      await effects.send(carriers, route, dispatch);
      effects.retryAt("send", "1", Date.now() - 1);
      await effects.send(carriers, route, dispatch);
      expect(inDoubt).toEqual([false, false, true]);
    }));

  it("a retry waits until its time, and counts", () =>
    inObject(async (storage) => {
      const effects = new Effects(storage.sql, 30_000, 3_600_000);
      const { sent, carriers } = capturingCarriers();
      effects.add("model", "j1", "c1");
      const later = Date.now() + 60_000;
      expect(effects.retryAt("model", "j1", later)).toBe(1);
      await effects.send(carriers, route, carry({}));
      expect(sent).toEqual([]);
      expect(effects.nextDue()).toBe(later);
    }));

  it("a due effect goes straight to its lane's courier, a courier's effects in one hand-off and in order; those a courier does not take go on the queue; refused by both, they stay due", () =>
    inObject(async (storage) => {
      const effects = new Effects(storage.sql, 30_000, 3_600_000);
      const lane = (kind: string, conversation: string) => courierName({ ...route, lane: `${kind}:${conversation}` });
      // c2's model lane and c3's send lane: couriers that do not answer.
      const down = conversationsWhose((c) => lane("model", c) !== lane("tool", "c1"));
      const sendDown = conversationsWhose((c) => lane("send", c) !== lane("tool", "c1") && lane("send", c) !== lane("model", down));
      const handOffs: { courier: string; ids: string[] }[] = [];
      const queued: string[] = [];
      let queueUp = true;
      const carriers = {
        couriers: {
          idFromName: (name: string) => name as unknown as DurableObjectId,
          get: (id: DurableObjectId) => ({
            take: async (taken: EffectMessage[]) => {
              const courier = id as unknown as string;
              if (courier === lane("model", down) || courier === lane("send", sendDown)) throw new Error("down");
              handOffs.push({ courier, ids: taken.map((e) => e.id) });
            },
          }),
        },
        queue: {
          sendBatch: async (batch: MessageSendRequest<EffectMessage>[]) => {
            if (!queueUp) throw new Error("the queue refuses");
            queued.push(...batch.map((m) => m.body.id));
          },
        } as unknown as Queue<EffectMessage>,
      };
      effects.add("tool", "t1", "c1");
      effects.add("tool", "t2", "c1");
      effects.add("model", "j1", down);
      await effects.send(carriers, route, carry({}));
      expect(handOffs).toEqual([{ courier: lane("tool", "c1"), ids: ["t1", "t2"] }]);
      expect(queued).toEqual(["j1"]);
      expect(["t1", "t2"].every((id) => effects.inFlight("tool", id)) && effects.inFlight("model", "j1")).toBe(true);
      // Neither its courier nor the queue takes it: it stays due for the next pass.
      queueUp = false;
      effects.add("send", "s1", sendDown);
      expect((await effects.send(carriers, route, carry({}))).sent).toEqual([]);
      expect(effects.inFlight("send", "s1")).toBe(false);
      expect(effects.nextDue()).toBeLessThanOrEqual(Date.now());
    }));
});

/** The first conversation id (c2, c3, …) that `ok` accepts. */
function conversationsWhose(ok: (conversation: string) => boolean): string {
  for (let n = 2; ; n++) if (ok(`c${n}`)) return `c${n}`;
}

describe("Typing", () => {
  const silent: ChatOutbound = { platform: "slack", split: (text) => [text], deliver: async () => ({ ok: true }) };
  const typingToo: ChatOutbound = { platform: "discord", split: (text) => [text], deliver: async () => ({ ok: true }), typing: async () => ({ ok: true }) };
  const deps: RuntimeDeps = { outbounds: [silent, typingToo], plugins: [] };
  const here = { platform: "discord" as const, target: { channelId: "1" } };

  it("renews while the turn works and waits for nobody, ends with the turn, and is never made for a platform without it", () =>
    inObject((storage) => {
      const effects = new Effects(storage.sql, 30_000, 3_600_000);
      const conversations = new Conversations(storage.sql);
      const holds = new Holds(storage.sql);
      const typing = new Typing(env as unknown as Env, effects, conversations, holds, deps);
      const running = (id: string, address: typeof here | { platform: "slack"; target: { channel: string } }) => {
        conversations.setReplyTo(conversations.create(id, USER, Date.now()).id, address);
        conversations.beginTurn(conversations.get(id)!, { by: USER });
        typing.start(conversations.get(id)!);
      };

      running("quiet", { platform: "slack", target: { channel: "C1" } });
      expect(effects.get("typing", "quiet")).toBeUndefined();

      running("c", here);
      expect(typing.work("c")).toEqual(here);
      typing.report("c");
      const next = effects.get("typing", "c")!;
      expect(next.state).toBe("waiting");
      expect(next.due_at).toBeGreaterThan(Date.now() + TYPING_REFRESH_MS - 1_000);

      // Waiting for a person: not renewed; the next model call shows it again.
      expect(typing.work("c")).toEqual(here);
      const hold = holds.create({ conversation: "c", callKey: "k", tool: "t", args: {}, requestedBy: "u", requester: null, ttlMs: 60_000 });
      typing.report("c");
      expect(effects.get("typing", "c")).toBeUndefined();
      storage.sql.exec("UPDATE holds SET status = 'approved' WHERE id = ?", hold.id);
      typing.start(conversations.get("c")!);

      // The turn ends with a renewal on its way: it finds nothing to do.
      conversations.finishTurn("c", "idle", null);
      expect(typing.work("c")).toBeNull();
    }));
});

/** An outbox's conversations are told nothing where a test does not look. */
const untold = () => {};

describe("Outbox", () => {
  const address = { platform: "slack" as const, target: { channel: "C1", thread_ts: "1.2" } };
  const outbound: ChatOutbound = { platform: "slack", split: (text) => text.split("|"), deliver: async () => ({ ok: true }) };
  const deps: RuntimeDeps = { outbounds: [outbound], plugins: [] };
  const status = (text: string): OutboundMessage => ({ kind: "status", state: "working", text });
  /** Sends the due runs as the object's pass does; returns each run's head and deliveries. */
  async function sendDue(effects: Effects, outbox: Outbox) {
    const { sent, carriers } = capturingCarriers();
    await effects.send(carriers, route, (row) => {
      const run = outbox.run(route, Number(row.id));
      return run && { work: run };
    });
    return sent.map((m) => ({ head: Number(m.id), rows: (m.work as SendRun).deliveries }));
  }
  const ok = { ok: true as const };

  it("sends a conversation's waiting rows as one run, in order, one run at a time; a reply is split as the platform takes it", () =>
    inObject(async (storage) => {
      const effects = new Effects(storage.sql, 30_000, 3_600_000);
      const outbox = new Outbox(storage, "obj", deps, effects, untold);
      outbox.post("c1", address, { kind: "reply", text: "one|two" }, null);
      outbox.post("c2", address, { kind: "notice", text: "other" }, null);
      const [c1, c2] = await sendDue(effects, outbox);
      expect(c1!.rows.map((d) => [d.conversation, d.message, d.uncertain])).toEqual([
        ["c1", { kind: "reply", text: "one" }, false],
        ["c1", { kind: "reply", text: "two" }, false],
      ]);
      expect(c2!.rows.map((d) => d.message)).toEqual([{ kind: "notice", text: "other" }]);
      // A row written while a run is out waits for it.
      outbox.post("c1", address, { kind: "notice", text: "three" }, null);
      expect(await sendDue(effects, outbox)).toEqual([]);
      expect(outbox.settle(c1!.head, c1!.rows.map((d) => ({ row: d.row, result: ok })))).toBe(true);
      expect(outbox.settle(c1!.head, c1!.rows.map((d) => ({ row: d.row, result: ok })))).toBe(false);
      expect((await sendDue(effects, outbox)).map((r) => r.rows.map((d) => d.message))).toEqual([[{ kind: "notice", text: "three" }]]);
    }));

  it("an update replaces a waiting earlier state of itself, never a row already under way", () =>
    inObject(async (storage) => {
      const effects = new Effects(storage.sql, 30_000, 3_600_000);
      const outbox = new Outbox(storage, "obj", deps, effects, untold);
      outbox.post("c1", address, status("working"), "status:c1:1");
      outbox.post("c1", address, status("still working"), "status:c1:1");
      expect(storage.sql.exec("SELECT COUNT(*) AS n FROM outbox").one().n).toBe(1);
      const [under] = await sendDue(effects, outbox);
      expect(under!.rows.map((d) => d.message)).toEqual([status("still working")]);
      // Under way now: the next state is a row of its own, sent after it.
      outbox.post("c1", address, status("done"), "status:c1:1");
      expect(storage.sql.exec("SELECT COUNT(*) AS n FROM outbox").one().n).toBe(2);
      // The run's lease runs out: sent again, the row it carried in doubt (it may have been posted unanswered).
      storage.sql.exec("UPDATE effects SET due_at = ?", Date.now() - 1);
      const [again] = await sendDue(effects, outbox);
      expect(again!.rows.map((d) => [d.message, d.uncertain])).toEqual([
        [status("still working"), true],
        [status("done"), false],
      ]);
      outbox.settle(again!.head, [{ row: again!.rows[0]!.row, result: { ok: true, ref: "ts9" } }]);
      expect(await sendDue(effects, outbox)).toMatchObject([{ rows: [{ message: status("done"), ref: "ts9", uncertain: false }] }]);
    }));

  it("a 429 waits out Retry-After and leaves no doubt; no answer leaves the doubt; a permanent failure gives the row up and the run goes on", () =>
    inObject(async (storage) => {
      const effects = new Effects(storage.sql, 30_000, 3_600_000);
      const outbox = new Outbox(storage, "obj", deps, effects, untold);
      outbox.post("c1", address, { kind: "reply", text: "a|b" }, null);
      const [first] = await sendDue(effects, outbox);
      const [a, b] = first!.rows.map((d) => d.row);
      outbox.settle(first!.head, [{ row: a!, result: { ok: false, error: "ratelimited", retryAfterMs: 7_000 } }]);
      // A wait, not an attempt: neither the effect's retries nor the row's attempts count it.
      expect(effects.get("send", String(a))).toMatchObject({ state: "waiting", retries: 0 });
      expect(storage.sql.exec("SELECT attempts FROM outbox WHERE id = ?", a).one().attempts).toBe(0);
      expect(effects.nextDue()).toBeGreaterThan(Date.now() + 5_000);
      storage.sql.exec("UPDATE effects SET due_at = ?", Date.now() - 1);
      const [second] = await sendDue(effects, outbox);
      expect(second!.rows.map((d) => [d.row, d.uncertain])).toEqual([[a, false], [b, false]]);
      outbox.settle(second!.head, [{ row: a!, result: { ok: false, error: "no answer within 10000 ms" } }]);
      storage.sql.exec("UPDATE effects SET due_at = ?", Date.now() - 1);
      const [third] = await sendDue(effects, outbox);
      expect(third!.rows.map((d) => [d.row, d.uncertain])).toEqual([[a, true], [b, false]]);
      outbox.settle(third!.head, [
        { row: a!, result: { ok: false, error: "channel_not_found", permanent: true, unreachable: true } },
        { row: b!, result: ok },
      ]);
      expect(storage.sql.exec("SELECT id, status FROM outbox ORDER BY id").toArray()).toEqual([{ id: a, status: "failed" }, { id: b, status: "sent" }]);
      expect(effects.nextDue()).toBeNull();
    }));

  it("rate limits never give a row up, however many; a refusal that will not change does, and the conversation is told (its thread too while it can be posted to)", () =>
    inObject(async (storage) => {
      const told: [string, string][] = [];
      const effects = new Effects(storage.sql, 30_000, 3_600_000);
      const outbox = new Outbox(storage, "obj", deps, effects, (conversation, error) => told.push([conversation, error]));
      outbox.post("c1", address, { kind: "reply", text: "patient" }, null);
      for (let i = 0; i < 25; i++) {
        storage.sql.exec("UPDATE effects SET due_at = ?", Date.now() - 1);
        const [run] = await sendDue(effects, outbox);
        expect(run!.rows.map((d) => d.message)).toEqual([{ kind: "reply", text: "patient" }]);
        outbox.settle(run!.head, [{ row: run!.rows[0]!.row, result: { ok: false, error: "chat.postMessage: rate limited", retryAfterMs: 1_000 } }]);
      }
      expect(told).toEqual([]);
      storage.sql.exec("UPDATE effects SET due_at = ?", Date.now() - 1);
      const [last] = await sendDue(effects, outbox);
      outbox.settle(last!.head, [{ row: last!.rows[0]!.row, result: { ok: false, error: "chat.postMessage: msg_blocks_too_long", permanent: true } }]);
      expect(told).toEqual([["c1", "a message could not be delivered to slack: chat.postMessage: msg_blocks_too_long"]]);
      // The thread hears of it; a notice refused in turn is not noticed again.
      const [notice] = await sendDue(effects, outbox);
      expect(notice!.rows.map((d) => d.message)).toEqual([{ kind: "notice", text: "⚠️ A message in this conversation could not be delivered (chat.postMessage: msg_blocks_too_long)." }]);
      outbox.settle(notice!.head, [{ row: notice!.rows[0]!.row, result: { ok: false, error: "chat.postMessage: msg_too_long", permanent: true } }]);
      expect(await sendDue(effects, outbox)).toEqual([]);
      // Where nothing can be posted any more (the channel is gone), only the console is told.
      outbox.post("c2", address, { kind: "reply", text: "lost" }, null);
      const [gone] = await sendDue(effects, outbox);
      outbox.settle(gone!.head, [{ row: gone!.rows[0]!.row, result: { ok: false, error: "chat.postMessage: channel_not_found", permanent: true, unreachable: true } }]);
      expect(told.at(-1)).toEqual(["c2", "a message could not be delivered to slack: chat.postMessage: channel_not_found"]);
      expect(await sendDue(effects, outbox)).toEqual([]);
    }));

  it("a run that starts with an update of a posted message waits out the platform's spacing since the conversation's last one; a later state replaces it meanwhile", () =>
    inObject(async (storage) => {
      const paced: RuntimeDeps = { outbounds: [{ ...outbound, updateSpacingMs: 1000 }], plugins: [] };
      const effects = new Effects(storage.sql, 30_000, 3_600_000);
      const outbox = new Outbox(storage, "obj", paced, effects, untold);
      const due = (conversation: string) => storage.sql.exec<{ id: string; due_at: number }>("SELECT id, due_at FROM effects WHERE conversation = ?", conversation).one();
      outbox.post("c1", address, status("working"), "status:c1:1");
      expect(due("c1").due_at).toBeLessThanOrEqual(Date.now()); // the first post goes at once
      const [posted] = await sendDue(effects, outbox);
      outbox.settle(posted!.head, [{ row: posted!.rows[0]!.row, result: { ok: true, ref: "ts1" } }]);
      const sentAt = storage.sql.exec<{ sent_at: number }>("SELECT sent_at FROM outbox WHERE id = ?", posted!.rows[0]!.row).one().sent_at;

      outbox.post("c1", address, status("using a"), "status:c1:1");
      outbox.post("c1", address, status("using b"), "status:c1:1");
      expect(storage.sql.exec("SELECT COUNT(*) AS n FROM outbox WHERE status = 'pending'").one().n).toBe(1);
      expect(due("c1").due_at).toBe(sentAt + 1000);
      const run = outbox.run(route, Number(due("c1").id))!;
      expect(run).toMatchObject({ deliveries: [{ message: status("using b"), ref: "ts1" }], spacingMs: 1000, lastPacedAt: sentAt });
      // Another conversation's first post is not held by it.
      outbox.post("c2", address, status("working"), "status:c2:1");
      expect(due("c2").due_at).toBeLessThanOrEqual(Date.now());
    }));
});

describe("SEND_TIMEOUT_SECONDS", () => {
  const withTimeout = (value: string | undefined) => ({ ...env, SEND_TIMEOUT_SECONDS: value }) as Env;

  it("is 10 s unless set, and must leave half the send's lease for the claim and the report", () => {
    expect(sendTimeoutMs(withTimeout(undefined))).toBe(10_000);
    expect(sendTimeoutMs(withTimeout("2.5"))).toBe(2_500);
    expect(sendTimeoutMs(withTimeout(String(SEND_LEASE_MS / 2000)))).toBe(SEND_LEASE_MS / 2);
    expect(() => sendTimeoutMs(withTimeout(String(SEND_LEASE_MS / 2000 + 1)))).toThrow(/SEND_TIMEOUT_SECONDS is invalid[\s\S]*half the send lease/);
    expect(() => sendTimeoutMs(withTimeout("0"))).toThrow(/SEND_TIMEOUT_SECONDS is invalid/);
    expect(() => sendTimeoutMs(withTimeout("ten"))).toThrow(/SEND_TIMEOUT_SECONDS is not valid JSON/);
  });
});

describe("Inbound", () => {
  /** The parts accept touches, wired as the object wires them; decisions are not exercised here (approvals.test.ts). */
  function inbound(storage: DurableObjectStorage) {
    const store = new Conversations(storage.sql);
    const effects = new Effects(storage.sql, 30_000, 3_600_000);
    const jobs = new ModelJobs(storage, "obj", undefined as unknown as R2Bucket, effects);
    const outbox = new Outbox(storage, "obj", { outbounds: [], plugins: [] }, effects, untold);
    const typing = new Typing(env as unknown as Env, effects, store, new Holds(storage.sql), { outbounds: [], plugins: [] });
    const tools: ToolCalls = new ToolCalls(storage, store, effects, new MountSessions(storage.sql), () => { throw new Error("no holds here"); }, {
      answersLater: (name) => delegation.answersLater(name),
      take: (pass, conv, key, call) => delegation.take(pass, conv, key, call),
    }, () => []);
    const delegation: Delegation = new Delegation(storage.sql, env, store, tools, () => turns);
    const turns: Turns = new Turns(storage, store, jobs, tools, outbox, typing, undefined as never, () => "steer", delegation);
    return { store, accept: new Inbound(store, turns, jobs, undefined as never, (_conv, status) => `status: ${status}`) };
  }
  const event = (id: string, fields: object) => ({ id, conversation: "c1", user: USER, ...fields }) as Parameters<Inbound["accept"]>[1];

  it("a platform's retry of an event is one event; only a message starts a conversation", () =>
    inObject((storage) => {
      const { store, accept } = inbound(storage);
      expect(accept.accept(route, event("e0", { kind: "interrupt" }))).toMatchObject({ accepted: true, notice: "Nothing is running in this conversation." });
      expect(store.get("c1")).toBeUndefined();
      const logRows = () => storage.sql.exec("SELECT COUNT(*) AS n FROM log WHERE conversation = 'c1'").one().n;
      expect(accept.accept(route, event("e1", { kind: "message", text: "hi" }))).toMatchObject({ accepted: true, status: "running" });
      const afterFirst = logRows();
      expect(afterFirst).toBeGreaterThan(0);
      expect(accept.accept(route, event("e1", { kind: "message", text: "hi" }))).toMatchObject({ accepted: false });
      expect(logRows()).toBe(afterFirst);
      expect(accept.accept(route, event("e2", { kind: "command", command: "status" }))).toMatchObject({ notice: "status: running" });
    }));

  it("a note (what the person looks at) makes the conversation but starts no turn; the model reads it with the first message, which is told first", () =>
    inObject((storage) => {
      const { store, accept } = inbound(storage);
      expect(accept.accept(route, event("n1", { kind: "note", text: "looking at #launch" }))).toMatchObject({ accepted: true, status: "idle" });
      expect(store.get("c1")).toMatchObject({ status: "idle", turn: 0 });
      expect(store.drain("c1")).toEqual([{ type: "marker", data: { text: "looking at #launch" } }]);
      expect(accept.accept(route, event("n2", { kind: "note", text: "looking at #design" }))).toMatchObject({ status: "idle" });
      expect(accept.accept(route, event("m1", { kind: "message", text: "hi" }))).toMatchObject({ status: "running", first: true });
      // The turn's start wrote the waiting note before the message that started it.
      expect(store.drain("c1")).toEqual([]);
      const log = store.log("c1");
      expect(log.map((row) => row.type)).toEqual(["turn_start", "marker", "user"]);
      expect(JSON.parse(log[1]!.data)).toEqual({ text: "looking at #design" });
      expect(accept.accept(route, event("m2", { kind: "message", text: "and?" })).first).toBeUndefined();
    }));
});

describe("Scheduler", () => {
  it("runs one pass at a time (a second call joins it and asks for another round only for work due now), arms a watchdog while it runs, and arms only what is due", () =>
    inObject(async (storage) => {
      let passes = 0;
      let due: (number | null)[] = [];
      let hold: Promise<void> | null = null;
      let release!: () => void;
      const held = () => (hold = new Promise<void>((r) => (release = r)));
      const scheduler = new Scheduler(
        storage,
        async () => {
          passes++;
          due = due.filter((t) => t === null || t > Date.now()); // a pass does what is due now
          if (hold) await hold;
          hold = null;
        },
        () => due,
      );
      held();
      const first = scheduler.drive();
      await new Promise((r) => setTimeout(r, 10));
      expect(await storage.getAlarm()).toBeGreaterThan(Date.now() + 10_000); // the watchdog
      // Work due now arrives while the pass runs: one more round.
      const second = scheduler.drive();
      due = [Date.now()];
      release();
      await Promise.all([first, second]);
      expect(passes).toBe(2);
      expect(await storage.getAlarm()).toBeNull(); // nothing due: idle means nothing armed
      // Asked again while a pass runs, but nothing is due now: no empty round.
      held();
      const third = scheduler.drive();
      await new Promise((r) => setTimeout(r, 10));
      const fourth = scheduler.drive();
      release();
      await Promise.all([third, fourth]);
      expect(passes).toBe(3);
      due = [null, Date.now() + 60_000, Date.now() + 5_000];
      await scheduler.drive();
      expect(passes).toBe(4);
      expect(await storage.getAlarm()).toBe(due[2]);
    }));
});

describe("SettingsCopy", () => {
  it("takes a newer copy, keeps a newer one against an older push, and refuses what does not parse", () =>
    inObject((storage) => {
      const copy = new SettingsCopy(storage.sql);
      expect(copy.get()).toBeNull();
      const v2 = { ...NO_SETTINGS, version: 2, models: { tenant: { model: "fake/test-model" }, agent: null } };
      expect(copy.apply(JSON.stringify(v2))).toBe(true);
      expect(copy.apply(JSON.stringify({ ...NO_SETTINGS, version: 1 }))).toBe(false);
      expect(copy.get()).toEqual(v2);
      expect(() => copy.apply(JSON.stringify({ version: 3, mounts: "all" }))).toThrow(/stored settings are invalid/);
      expect(copy.get()).toEqual(v2);
    }));
});

// The object's parts on their own, each over a real object's SQLite (a fresh
// object per test, its schema migrated): fast checks of the rules each part
// owns, beside the end-to-end tests that run whole turns.
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import type { ChatOutbound, OutboundMessage, RuntimeDeps } from "../runtime/chat.ts";
import { Conversations } from "../runtime/store/index.ts";
import { sendTimeoutMs, Effects, MAX_LEASES, SEND_LEASE_MS, type EffectMessage, Outbox, Typing, TYPING_REFRESH_MS } from "../runtime/effects/index.ts";
import { Inbound, Scheduler } from "../runtime/object/index.ts";
import { MountSessions, ToolCalls } from "../runtime/tools/index.ts";
import { ModelJobs } from "../runtime/models/index.ts";
import { Turns } from "../runtime/turns/index.ts";
import { NO_SETTINGS, SettingsCopy } from "../runtime/control/index.ts";
import { Holds } from "../approvals/index.ts";
import { inObject } from "./agents.ts";

const route = { tenant: "parts", agent: "unit" };
const USER = { platform: "api" as const, id: "u" };

/** A queue that keeps what is sent to it. */
function capturingQueue() {
  const sent: EffectMessage[] = [];
  return { sent, queue: { sendBatch: async (batch: MessageSendRequest<EffectMessage>[]) => void sent.push(...batch.map((m) => m.body)) } as unknown as Queue<EffectMessage> };
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
  it("a waiting effect is sent once per lease; a claim starts its run lease and counts earlier claims", () =>
    inObject(async (storage) => {
      const effects = new Effects(storage.sql, 30_000);
      const { sent, queue } = capturingQueue();
      effects.add("model", "j1", "c1");
      expect(effects.inFlight("model", "j1")).toBe(false);
      expect(await effects.send(queue, route)).toEqual({ sent: [expect.objectContaining({ kind: "model", id: "j1", conversation: "c1" })], exhausted: [] });
      expect(sent).toEqual([{ ...route, kind: "model", id: "j1", lane: "model:c1" }]);
      expect(effects.inFlight("model", "j1")).toBe(true);
      // Not due again until its lease runs out.
      await effects.send(queue, route);
      expect(sent).toHaveLength(1);
      expect(effects.nextDue()).toBeGreaterThan(Date.now() + 20_000);
      expect(effects.claim("model", "j1")).toEqual({ earlierClaims: 0 });
      expect(effects.claim("model", "j1")).toEqual({ earlierClaims: 1 });
      expect(effects.nextDue()).toBeGreaterThan(Date.now() + 100_000); // a model call's run lease
      effects.done("model", "j1");
      expect(effects.claim("model", "j1")).toBeNull();
      expect(effects.nextDue()).toBeNull();
    }));

  it("a lease that runs out sends the effect again, same id; after the last one it is handed back, gone", () =>
    inObject(async (storage) => {
      const effects = new Effects(storage.sql, 30_000);
      const { sent, queue } = capturingQueue();
      effects.add("send", "7", "c1");
      await effects.send(queue, route);
      for (let lease = 1; lease < MAX_LEASES; lease++) {
        storage.sql.exec("UPDATE effects SET due_at = ?", Date.now() - 1);
        expect((await effects.send(queue, route)).exhausted).toEqual([]);
      }
      expect(sent.map((m) => m.id)).toEqual(Array(MAX_LEASES).fill("7"));
      storage.sql.exec("UPDATE effects SET due_at = ?", Date.now() - 1);
      const { exhausted } = await effects.send(queue, route);
      expect(exhausted.map((e) => [e.kind, e.id])).toEqual([["send", "7"]]);
      expect(effects.get("send", "7")).toBeUndefined();
      expect(sent).toHaveLength(MAX_LEASES);
    }));

  it("a retry waits until its time, and counts", () =>
    inObject(async (storage) => {
      const effects = new Effects(storage.sql, 30_000);
      const { sent, queue } = capturingQueue();
      effects.add("model", "j1", "c1");
      const later = Date.now() + 60_000;
      expect(effects.retryAt("model", "j1", later)).toBe(1);
      await effects.send(queue, route);
      expect(sent).toEqual([]);
      expect(effects.nextDue()).toBe(later);
    }));
});

describe("ModelJobs", () => {
  it("a job is an effect until it is settled; its request is claimed once pending; usage is kept once", () =>
    inObject(async (storage) => {
      const effects = new Effects(storage.sql, 30_000);
      const jobs = new ModelJobs(storage, "obj", undefined as unknown as R2Bucket, effects);
      const id = jobs.newId("c1", 1, "chat");
      const request = { model: { model: "local" }, systemPrompt: "s", messages: [], tools: [] };
      jobs.create(id, "c1", 1, "chat", JSON.stringify(request), null);
      expect(jobs.isOpen("c1")).toBe(true);
      expect(effects.get("model", id)).toBeDefined();
      expect(await jobs.claim(id)).toEqual({ request });
      const message = { role: "assistant" as const, content: [], api: "x", provider: "p", model: "m", usage: { input: 3, output: 4, cacheRead: 5, cacheWrite: 6, totalTokens: 0, cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0.5 } }, stopReason: "stop" as const, timestamp: 0 };
      jobs.recordUsage(id, message);
      jobs.recordUsage(id, { ...message, usage: { ...message.usage, output: 999 } });
      expect(storage.sql.exec("SELECT output_tokens, cost FROM model_jobs WHERE id = ?", id).one()).toEqual({ output_tokens: 4, cost: 0.5 });
      jobs.settle(jobs.get(id)!, { kind: "reply", message });
      expect(jobs.isOpen("c1")).toBe(false);
      expect(effects.get("model", id)).toBeUndefined();
      expect(await jobs.claim(id)).toBeNull();
    }));

  it("ids are never reused; a stopped turn's jobs are discarded with their effects", () =>
    inObject((storage) => {
      const effects = new Effects(storage.sql, 30_000);
      const jobs = new ModelJobs(storage, "obj", undefined as unknown as R2Bucket, effects);
      const ids = new Set(Array.from({ length: 50 }, () => jobs.newId("c1", 1, "chat")));
      expect(ids.size).toBe(50);
      const id = [...ids][0]!;
      jobs.create(id, "c1", 1, "chat", "{}", null);
      jobs.discardOpen("c1");
      expect(jobs.get(id)!.status).toBe("discarded");
      expect(effects.get("model", id)).toBeUndefined();
    }));
});

describe("Typing", () => {
  const silent: ChatOutbound = { platform: "slack", split: (text) => [text], deliver: async () => ({ ok: true }) };
  const typingToo: ChatOutbound = { platform: "discord", split: (text) => [text], deliver: async () => ({ ok: true }), typing: async () => ({ ok: true }) };
  const deps: RuntimeDeps = { outbounds: [silent, typingToo], plugins: [] };
  const here = { platform: "discord" as const, target: { channelId: "1" } };

  it("renews while the turn works and waits for nobody, ends with the turn, and is never made for a platform without it", () =>
    inObject((storage) => {
      const effects = new Effects(storage.sql, 30_000);
      const conversations = new Conversations(storage.sql);
      const holds = new Holds(storage.sql);
      const typing = new Typing(effects, conversations, holds, deps);
      const running = (id: string, address: typeof here | { platform: "slack"; target: { channel: string } }) => {
        conversations.setReplyTo(conversations.create(id, USER, Date.now()).id, address);
        conversations.beginTurn(conversations.get(id)!, { by: USER });
        typing.start(conversations.get(id)!);
      };

      running("quiet", { platform: "slack", target: { channel: "C1" } });
      expect(effects.get("typing", "quiet")).toBeUndefined();

      running("c", here);
      expect(typing.claim("c")).toEqual(here);
      typing.report("c");
      const next = effects.get("typing", "c")!;
      expect(next.state).toBe("waiting");
      expect(next.due_at).toBeGreaterThan(Date.now() + TYPING_REFRESH_MS - 1_000);

      // Waiting for a person: not renewed; the next model call shows it again.
      expect(typing.claim("c")).toEqual(here);
      const hold = holds.create({ conversation: "c", callKey: "k", tool: "t", args: {}, requestedBy: "u", requester: null, ttlMs: 60_000 });
      typing.report("c");
      expect(effects.get("typing", "c")).toBeUndefined();
      storage.sql.exec("UPDATE holds SET status = 'approved' WHERE id = ?", hold.id);
      typing.start(conversations.get("c")!);

      // The turn ends with a renewal on its way: its claim finds nothing to do.
      conversations.finishTurn("c", "idle", null);
      expect(typing.claim("c")).toBeNull();
      expect(effects.get("typing", "c")).toBeUndefined();
    }));
});

describe("Outbox", () => {
  const address = { platform: "slack" as const, target: { channel: "C1", thread_ts: "1.2" } };
  const outbound: ChatOutbound = { platform: "slack", split: (text) => text.split("|"), deliver: async () => ({ ok: true }) };
  const deps: RuntimeDeps = { outbounds: [outbound], plugins: [] };
  const status = (text: string): OutboundMessage => ({ kind: "status", state: "working", text });

  it("releases one row per conversation at a time, in order; a reply is split as the platform takes it", () =>
    inObject((storage) => {
      const effects = new Effects(storage.sql, 30_000);
      const outbox = new Outbox(storage, "obj", deps, effects);
      outbox.post("c1", address, { kind: "reply", text: "one|two" }, null);
      outbox.post("c2", address, { kind: "notice", text: "other" }, null);
      const released = () => storage.sql.exec<{ id: string; conversation: string }>("SELECT id, conversation FROM effects WHERE kind = 'send' ORDER BY id").toArray();
      expect(released().map((r) => r.conversation)).toEqual(["c1", "c2"]);
      const first = outbox.claim(route, Number(released()[0]!.id))!;
      expect(first.message).toEqual({ kind: "reply", text: "one" });
      expect(first.uncertain).toBe(false);
      outbox.settle(Number(released()[0]!.id), { ok: true, ref: "ts1" });
      const next = released().find((r) => r.conversation === "c1")!;
      expect(outbox.claim(route, Number(next.id))!.message).toEqual({ kind: "reply", text: "two" });
    }));

  it("an update replaces a waiting earlier state of itself, never a row already under way", () =>
    inObject((storage) => {
      const effects = new Effects(storage.sql, 30_000);
      const outbox = new Outbox(storage, "obj", deps, effects);
      outbox.post("c1", address, status("working"), "status:c1:1");
      outbox.post("c1", address, status("still working"), "status:c1:1");
      expect(storage.sql.exec("SELECT COUNT(*) AS n FROM outbox").one().n).toBe(1);
      const id = Number(storage.sql.exec<{ id: string }>("SELECT id FROM effects").one().id);
      expect(outbox.claim(route, id)!.message).toEqual(status("still working"));
      // Under way now: the next state is a row of its own, sent after it, with the first's ref.
      outbox.post("c1", address, status("done"), "status:c1:1");
      expect(storage.sql.exec("SELECT COUNT(*) AS n FROM outbox").one().n).toBe(2);
      expect(outbox.claim(route, id)!.uncertain).toBe(true);
      outbox.settle(id, { ok: true, ref: "ts9" });
      const next = Number(storage.sql.exec<{ id: string }>("SELECT id FROM effects").one().id);
      expect(outbox.claim(route, next)).toMatchObject({ message: status("done"), ref: "ts9" });
    }));

  it("a 429 waits out Retry-After and leaves no doubt; a permanent failure gives the row up and releases the next", () =>
    inObject((storage) => {
      const effects = new Effects(storage.sql, 30_000);
      const outbox = new Outbox(storage, "obj", deps, effects);
      outbox.post("c1", address, { kind: "reply", text: "a|b" }, null);
      const head = () => Number(storage.sql.exec<{ id: string }>("SELECT id FROM effects").one().id);
      const first = head();
      outbox.claim(route, first);
      outbox.settle(first, { ok: false, error: "ratelimited", retryAfterMs: 7_000 });
      expect(effects.get("send", String(first))).toMatchObject({ state: "waiting", retries: 1 });
      expect(effects.nextDue()).toBeGreaterThan(Date.now() + 5_000);
      // Refused, nothing was posted: the next claim has nothing to look for. A call with no answer leaves that doubt.
      expect(outbox.claim(route, first)!.uncertain).toBe(false);
      outbox.settle(first, { ok: false, error: "no answer within 10000 ms" });
      expect(outbox.claim(route, first)!.uncertain).toBe(true);
      outbox.settle(first, { ok: false, error: "channel_not_found", permanent: true });
      expect(storage.sql.exec("SELECT status FROM outbox WHERE id = ?", first).one().status).toBe("failed");
      expect(head()).not.toBe(first);
    }));

  it("an update of a posted message waits out the platform's spacing since the conversation's last one; a later state replaces it meanwhile", () =>
    inObject((storage) => {
      const paced: RuntimeDeps = { outbounds: [{ ...outbound, updateSpacingMs: 1000 }], plugins: [] };
      const effects = new Effects(storage.sql, 30_000);
      const outbox = new Outbox(storage, "obj", paced, effects);
      const due = (conversation: string) => storage.sql.exec<{ id: string; due_at: number }>("SELECT id, due_at FROM effects WHERE conversation = ?", conversation).one();
      outbox.post("c1", address, status("working"), "status:c1:1");
      const posted = Number(due("c1").id);
      expect(due("c1").due_at).toBeLessThanOrEqual(Date.now()); // the first post goes at once
      outbox.claim(route, posted);
      outbox.settle(posted, { ok: true, ref: "ts1" });
      const sentAt = storage.sql.exec<{ sent_at: number }>("SELECT sent_at FROM outbox WHERE id = ?", posted).one().sent_at;

      outbox.post("c1", address, status("using a"), "status:c1:1");
      outbox.post("c1", address, status("using b"), "status:c1:1");
      expect(storage.sql.exec("SELECT COUNT(*) AS n FROM outbox WHERE status = 'pending'").one().n).toBe(1);
      expect(due("c1").due_at).toBe(sentAt + 1000);
      expect(outbox.claim(route, Number(due("c1").id))).toMatchObject({ message: status("using b"), ref: "ts1" });
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
    const effects = new Effects(storage.sql, 30_000);
    const jobs = new ModelJobs(storage, "obj", undefined as unknown as R2Bucket, effects);
    const outbox = new Outbox(storage, "obj", { outbounds: [], plugins: [] }, effects);
    const typing = new Typing(effects, store, new Holds(storage.sql), { outbounds: [], plugins: [] });
    const tools = new ToolCalls(storage, store, effects, new MountSessions(storage.sql), () => { throw new Error("no holds here"); });
    const turns = new Turns(storage, store, jobs, tools, outbox, typing, undefined as never);
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
      expect(store.drain("c1")).toEqual([{ type: "marker", data: { text: "looking at #design" } }]);
      expect(accept.accept(route, event("m2", { kind: "message", text: "and?" })).first).toBeUndefined();
    }));
});

describe("Scheduler", () => {
  it("runs one pass at a time (a second call joins it and asks for another round), arms a watchdog while it runs, and arms only what is due", () =>
    inObject(async (storage) => {
      let passes = 0;
      let due: (number | null)[] = [];
      let release!: () => void;
      const gate = new Promise<void>((r) => (release = r));
      const scheduler = new Scheduler(
        storage,
        async () => {
          passes++;
          if (passes === 1) await gate;
        },
        () => due,
      );
      const first = scheduler.drive();
      await new Promise((r) => setTimeout(r, 10));
      expect(await storage.getAlarm()).toBeGreaterThan(Date.now() + 10_000); // the watchdog
      const second = scheduler.drive();
      release();
      await Promise.all([first, second]);
      expect(passes).toBe(2);
      expect(await storage.getAlarm()).toBeNull(); // nothing due: idle means nothing armed
      due = [null, Date.now() + 60_000, Date.now() + 5_000];
      await scheduler.drive();
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

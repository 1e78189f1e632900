// Provider back-pressure (runtime/models/gate.ts, gated-call.ts): a rate limit
// is the key's, so every agent calling with one key waits as one. The fake
// provider limits a key the way each API does (test/fakes/model-provider.mjs,
// "busy"): Anthropic's retry-after, OpenAI's retry-after-ms, Gemini's
// RetryInfo. Windows are 3 s here instead of 20 s, and the limit lasts until
// every conversation waits on it and the key was tried again (instead of a
// fixed 45 s, which a loaded machine may not fill): the same mechanism, in seconds.
import { env } from "cloudflare:workers";
import { describe, expect, it, vi } from "vitest";
import { callProvider, modelChoice, ProviderGate } from "../../../runtime/models/index.ts";
import { chooseModels, getConversation, postMessage, providerRequests, script, settled, unique, waitFor, withVars, worker } from "../../support.ts";
import { type Delivery, hook, message, send, tenantWithCallback } from "../../bridges/webhook/helpers.ts";

const E = env as unknown as Record<string, string>;

interface BusyLog {
  requests: { at: number; scenario: string; key: "operator" | "tenant"; status: number }[];
  windows: { from: number; to: number }[];
}

/**
 * The fake provider limits the operator's key for requests of scenarios named
 * `<prefix>…`, each refusal saying "come back in waitMs", for forMs from the
 * first one or until lifted (or, given `key`, those made with that key).
 */
async function limitKey(prefix: string, waitMs: number, forMs?: number, key?: string): Promise<void> {
  const res = await fetch(`${E.FAKE_PROVIDER_URL}/_control/busy/${prefix}`, { method: "PUT", body: JSON.stringify({ waitMs, forMs, key }) });
  expect(res.ok).toBe(true);
}

async function liftLimit(prefix: string): Promise<void> {
  expect((await fetch(`${E.FAKE_PROVIDER_URL}/_control/busy/${prefix}/lift`, { method: "POST" })).ok).toBe(true);
}

async function busyLog(prefix: string): Promise<BusyLog> {
  return (await fetch(`${E.FAKE_PROVIDER_URL}/_control/busy/${prefix}`)).json();
}

/** Requests that reached the provider inside a window it had announced. */
function insideWindows(log: BusyLog, key: "operator" | "tenant" = "operator"): BusyLog["requests"] {
  return log.requests.filter((r) => r.key === key && log.windows.some((w) => r.at > w.from && r.at < w.to));
}

const APIS = [
  { name: "Anthropic (retry-after)", model: "fake-gated-anthropic/claude-sonnet-4-5" },
  { name: "OpenAI (retry-after-ms)", model: "fake-gated/test-model" },
  { name: "Gemini (RetryInfo)", model: "fake-gated-gemini/gemini-2.5-flash" },
];

describe("a provider's rate limit on the operator's key", () => {
  // First in the file: the isolate has heard nothing of this key yet, whatever the tests after it leave in its view of the gates.
  it("a gate the isolate heard open is not on a call's way: a run of calls goes without asking it, the view is refreshed behind the first call; a 429 holds back the very next call", async () => {
    // Straight through callProvider, with a key no other test limits (the tenant's, on a provider no other test gives it).
    const choice = modelChoice(env, { model: "fake-gated/test-model" });
    const key = E.FAKE_TENANT_KEY!;
    const request = (s: string) => ({ model: { model: "fake-gated/test-model" }, systemPrompt: "Be brief.", messages: [{ role: "user" as const, content: `[s:${s}] hi`, timestamp: Date.now() }], tools: [] });
    const prefix = unique("trust");
    const run = Array.from({ length: 10 }, (_, i) => `${prefix}r${i}`);
    for (const s of [...run, `${prefix}warm`]) await script(s, [{ text: `answer ${s}` }]);
    // A first call hears the gate open (its first provider call takes seconds here, longer than a view stays fresh).
    expect((await callProvider(env, choice, request(`${prefix}warm`), { key })).call.kind).toBe("reply");
    await new Promise((resolve) => setTimeout(resolve, 1_300));
    // Asks of this key's gate (named as runtime/models/gate.ts names it): the other tests' conversations may still ask their own.
    const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(key)));
    const gate = env.PROVIDER_GATE.idFromName(`fake-gated:${Array.from(digest.slice(0, 16), (b) => b.toString(16).padStart(2, "0")).join("")}`);
    const admit = vi.spyOn(ProviderGate.prototype, "admit");
    const asked = () => admit.mock.contexts.filter((object) => (object as ProviderGate)["ctx"].id.equals(gate)).length;
    // The refresh is answered late (the gate itself answers it, two seconds on): a call that waited for it would finish after.
    const original = ProviderGate.prototype.isOpen;
    let refreshedAt = 0;
    const isOpen = vi.spyOn(ProviderGate.prototype, "isOpen").mockImplementation(async function (this: ProviderGate) {
      await new Promise((resolve) => setTimeout(resolve, 2_000));
      refreshedAt = Date.now();
      return original.call(this);
    });
    const refreshed = () => isOpen.mock.contexts.filter((object) => (object as ProviderGate)["ctx"].id.equals(gate)).length;
    try {
      const first = await callProvider(env, choice, request(run[0]!), { key });
      expect(first.call.kind).toBe("reply");
      expect(refreshedAt).toBe(0);
      const rest = await Promise.all(run.slice(1).map((s) => callProvider(env, choice, request(s), { key })));
      expect(rest.map((r) => r.call.kind)).toEqual(run.slice(1).map(() => "reply"));
      // Ten calls, no ask before any: the first found the view a second old and asked again behind it, once
      // (not awaited by the call: the asking may reach the gate after the calls are done).
      expect(asked()).toBe(0);
      await vi.waitFor(() => expect(refreshedAt).toBeGreaterThan(0), { timeout: 5_000 });
      expect(refreshed()).toBe(1);

      // The provider limits the key: the call that meets the 429 closes this isolate's view at once, so the next one asks the gate, which holds it back.
      const limited = `${prefix}l`;
      await limitKey(limited, 3_000, undefined, key);
      await script(`${limited}2`, [{ text: "not inside the window" }]);
      expect((await callProvider(env, choice, request(`${limited}1`), { key })).call.kind).toBe("limited");
      expect((await callProvider(env, choice, request(`${limited}2`), { key })).call.kind).toBe("limited");
      expect(asked()).toBe(1);
      expect((await busyLog(limited)).requests).toHaveLength(1);
      await liftLimit(limited);
    } finally {
      admit.mockRestore();
      isOpen.mockRestore();
    }
  });

  for (const api of APIS) {
    it(`${api.name}: 20 conversations of 4 tenants all answer, no request reaches it inside a window it announced, each person is told once`, async () => {
      const prefix = unique("busy");
      await limitKey(prefix, 3_000);
      const tenants = [await tenantWithCallback(), await tenantWithCallback(), await tenantWithCallback(), await tenantWithCallback()];
      await chooseModels(Object.fromEntries(tenants.map((t) => [t, api.model])));
      const conversations = tenants.flatMap((tenant, i) => [0, 1, 2, 3, 4].map((j) => ({ tenant, id: `c${j}`, scenario: `${prefix}t${i}c${j}` })));
      for (const c of conversations) await script(c.scenario, [{ text: `answer ${c.scenario}` }]);
      const ask = (c: (typeof conversations)[number]) => send(c.tenant, message(c.id, `[s:${c.scenario}] hello`));

      // The first conversation finds the key open; the others come once the provider has announced a wait
      // (a request already on its way when a window is announced cannot be called back).
      expect((await ask(conversations[0]!)).status).toBe(202);
      await waitFor("the provider's first wait", async () => (await busyLog(prefix)).windows.length > 0);
      for (const res of await Promise.all(conversations.slice(1).map(ask))) expect(res.status).toBe(202);
      const notices = async () => (await Promise.all(tenants.map(async (t) => (await hook(t)).deliveries))).flat().filter((d) => d.body.type === "notice");
      // The limit lasts until every conversation waits on it and the key has been tried again at least once.
      await waitFor(
        "every conversation waiting, and a second window",
        async () => (await notices()).length >= conversations.length && (await busyLog(prefix)).windows.length >= 2,
        45_000,
      );
      await liftLimit(prefix);

      const byTenant = await waitFor(
        "every conversation's answer",
        async () => {
          const all = await Promise.all(tenants.map(async (t) => [t, (await hook(t)).deliveries] as const));
          const replies = all.flatMap(([, ds]) => ds.filter((d) => d.body.type === "reply"));
          return replies.length >= conversations.length ? new Map(all) : undefined;
        },
        45_000,
      );
      const of = (c: (typeof conversations)[number], type: string): Delivery[] => byTenant.get(c.tenant)!.filter((d) => d.body.conversation === c.id && d.body.type === type);
      for (const c of conversations) {
        expect(of(c, "reply").map((d) => d.body.text)).toEqual([`answer ${c.scenario}`]);
        const told = of(c, "notice").map((d) => d.body.text);
        expect(told).toHaveLength(1);
        expect(told[0]).toMatch(/^The model is busy: its provider asked us to wait \(a rate limit\)\. I will try again at \d\d:\d\d:\d\d UTC \(in \d+ s\)\.$/);
      }
      const log = await busyLog(prefix);
      // The limit outlasted one window, so the key was tried again, once per window, never inside one.
      expect(log.windows.length).toBeGreaterThanOrEqual(2);
      expect(insideWindows(log)).toEqual([]);
      expect(log.requests.filter((r) => r.status === 200)).toHaveLength(conversations.length);
    }, 90_000);
  }

  it("after a wait, the first call lets the others go as soon as its answer begins, not when it ends", async () => {
    const prefix = unique("probe");
    await limitKey(prefix, 1_000);
    const tenant = await tenantWithCallback();
    await chooseModels({ [tenant]: "fake-gated/test-model" });
    // A slow answer: six pieces, a second apart.
    const slow = { text: "x".repeat(60), argumentChunk: 10, chunkDelayMs: 1_000 };
    const [a, b] = [`${prefix}a`, `${prefix}b`];
    await script(a, [slow]);
    await script(b, [slow]);
    expect((await send(tenant, message("a", `[s:${a}] hi`))).status).toBe(202);
    await waitFor("the provider's first wait", async () => (await busyLog(prefix)).windows.length > 0);
    expect((await send(tenant, message("b", `[s:${b}] hi`))).status).toBe(202);
    const delivered = async (type: string, state?: string) => (await hook(tenant)).deliveries.filter((d) => d.body.type === type && (state === undefined || d.body.state === state));
    await waitFor("both conversations waiting", async () => (await delivered("notice")).length === 2, 20_000);
    await liftLimit(prefix);
    await waitFor("both answers", async () => (await delivered("status", "done")).length === 2, 30_000);
    const answered = [...(await providerRequests(a)), ...(await providerRequests(b))].filter((r) => r.endedAt !== undefined).sort((x, y) => x.at - y.at);
    expect(answered).toHaveLength(2);
    // The second call was made while the first was still answering.
    expect(answered[1]!.at).toBeLessThan(answered[0]!.endedAt!);
  }, 60_000);

  it("a tenant's own key has its own gate: it answers while the operator's key waits", async () => {
    const prefix = unique("byok");
    await limitKey(prefix, 3_000, 4_000);
    const [operator, own] = [unique("gate-op"), unique("gate-own")];
    await chooseModels({ [operator]: "fake-gated-responses/gpt-4.1-mini" });
    const byok = await worker(`/v1/tenants/${own}/model`, {
      method: "PUT",
      headers: { authorization: "Bearer test-admin-token", "content-type": "application/json" },
      body: JSON.stringify({ model: "fake-gated-responses/gpt-4.1-mini", secret: "FAKE_TENANT_KEY" }),
    });
    expect(byok.status).toBe(200);
    const waiting = `${prefix}op`;
    const mine = `${prefix}own`;
    await script(waiting, [{ text: "the operator's key, after its wait" }]);
    await script(mine, [{ text: "my own key, at once" }]);
    await postMessage(operator, "a", { text: `[s:${waiting}] hi`, conversation: waiting });
    await waitFor("the operator's key to be told to wait", async () => (await busyLog(prefix)).windows.length > 0);
    await postMessage(own, "a", { text: `[s:${mine}] hi`, conversation: mine });
    const answered = await settled(own, "a", mine);
    expect(answered.transcript.at(-1)).toMatchObject({ role: "assistant", text: "my own key, at once" });
    // The tenant's call went inside the operator key's window: the provider limits keys apart, and so do we.
    expect((await getConversation(operator, "a", waiting)).status).toBe("waiting_model");
    expect(insideWindows(await busyLog(prefix), "tenant")).toHaveLength(1);
    const after = await settled(operator, "a", waiting, 20_000);
    expect(after.transcript.at(-1)).toMatchObject({ role: "assistant", text: "the operator's key, after its wait" });
    expect(insideWindows(await busyLog(prefix))).toEqual([]);
  }, 60_000);

  it("past MODEL_RATE_LIMIT_PATIENCE_SECONDS the turn fails, once, saying why; a patience that is not a number is named", async () => {
    await withVars({ MODEL_RATE_LIMIT_PATIENCE_SECONDS: "3" }, async () => {
      const prefix = unique("patience");
      await limitKey(prefix, 2_000);
      const tenant = await tenantWithCallback();
      await chooseModels({ [tenant]: "fake-gated-responses/gpt-4.1-mini" });
      const s = `${prefix}c`;
      await script(s, [{ text: "never" }]);
      expect((await send(tenant, message("c", `[s:${s}] hi`))).status).toBe(202);
      const notices = await waitFor("the turn to fail", async () => {
        const told = (await hook(tenant)).deliveries.filter((d) => d.body.type === "notice").map((d) => d.body.text);
        return told.some((text) => text.startsWith("Sorry")) ? told : undefined;
      }, 20_000);
      expect(notices).toHaveLength(2);
      expect(notices[0]).toMatch(/^The model is busy/);
      expect(notices[1]).toMatch(/^Sorry, this turn failed: the model provider is rate limiting the key this agent uses \(429 Rate limit reached for requests\. Please try again later\.\) and asked us to wait until \d\d:\d\d:\d\d UTC, past the 3 s a turn waits \(MODEL_RATE_LIMIT_PATIENCE_SECONDS; waited \d+ s\)/);
      // Two windows of 2 s: the second ends past the 3 s; no third request.
      expect((await busyLog(prefix)).requests).toHaveLength(2);
    });
    // A patience that is not a number fails the turn naming the variable.
    await withVars({ MODEL_RATE_LIMIT_PATIENCE_SECONDS: "a while" }, async () => {
      const prefix = unique("patience");
      await limitKey(prefix, 2_000);
      const tenant = unique("patience");
      await chooseModels({ [tenant]: "fake-gated-responses/gpt-4.1-mini" });
      const s = `${prefix}c`;
      await script(s, [{ text: "never" }]);
      await postMessage(tenant, "a", { text: `[s:${s}] hi`, conversation: s });
      expect(await settled(tenant, "a", s)).toMatchObject({ status: "failed", error: "configuration error: MODEL_RATE_LIMIT_PATIENCE_SECONDS is not valid JSON" });
    });
  }, 40_000);

});

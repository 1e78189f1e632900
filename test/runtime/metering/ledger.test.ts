// The usage ledger (runtime/metering/ledger.ts) and daily spend limits (runtime/metering/spend.ts):
// what the fake provider reports is what the ledger holds, once per paid answer, across
// evictions; a tenant at its limit is refused before the provider, once, in words.
import { runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it, vi } from "vitest";
import { courierStub } from "../../../runtime/courier/index.ts";
import { ledgerStub, type UsageRowOut, type UsageTotals, limitSentence } from "../../../runtime/metering/index.ts";
import { modelProviders, modelSettings } from "../../../runtime/models/index.ts";
import { courier, evict, evictCourier, rows } from "../../agents.ts";
import { captureConsole } from "../../leaks.ts";
import { conversationOf, holdSlack, messageEnvelope, newTs, postEvent, slackCalls, slackId, statusFinal, threadMessages, AGENT } from "../../bridges/slack/helpers.ts";
import { postMessage, providerRequests, releaseProvider, script, settled, unique, waitFor, withVars, worker, type ScriptStep } from "../../support.ts";

const ADMIN = { authorization: "Bearer test-admin-token", "content-type": "application/json" };

interface UsageAnswer {
  totals: UsageTotals;
  usage: UsageRowOut[];
  busy: { agent: string; busyMs: number; passes: number }[];
  today: { spentUsd: number; dailyUsd: number | null; exempt: boolean };
}

async function usage(tenant: string, query = ""): Promise<UsageAnswer> {
  const res = await worker(`/v1/tenants/${tenant}/usage${query}`, { headers: ADMIN });
  expect(res.status).toBe(200);
  return res.json();
}

/** The tenant's usage once its ledger has counted `calls` model calls: a job is counted after its reply is sent, so after its conversation settled. */
function counted(tenant: string, calls: number): Promise<UsageAnswer> {
  return waitFor(`${calls} model calls counted for ${tenant}`, async () => {
    const answer = await usage(tenant);
    return answer.totals.calls >= calls && answer;
  });
}

function setLimit(tenant: string, body: unknown): Promise<Response> {
  return worker(`/v1/tenants/${tenant}/limits`, { method: "PUT", headers: ADMIN, body: JSON.stringify(body) });
}

/** USD per million tokens, as the model table prices a model of the test's MODEL_PROVIDERS. */
function priced(model: string, u: { input: number; cached: number; cacheWrite: number; output: number }): number {
  const [provider, id] = [model.slice(0, model.indexOf("/")), model.slice(model.indexOf("/") + 1)];
  const { cost } = modelSettings(modelProviders(env).find((p) => p.id === provider)!, id);
  return (u.input * cost.input + u.cached * cost.cacheRead + u.cacheWrite * cost.cacheWrite + u.output * cost.output) / 1e6;
}

const near = (a: number, b: number) => expect(Math.abs(a - b)).toBeLessThan(1e-12);

/** What the fake provider billed for Chat Completions requests, in the ledger's terms (input excludes cached). */
function billed(requests: { usage?: Record<string, unknown> }[]) {
  const sent = requests.flatMap((r) => (r.usage ? [r.usage as { prompt_tokens: number; completion_tokens: number; prompt_tokens_details: { cached_tokens: number } }] : []));
  return {
    calls: sent.length,
    inputTokens: sent.reduce((n, u) => n + u.prompt_tokens - u.prompt_tokens_details.cached_tokens, 0),
    cachedInputTokens: sent.reduce((n, u) => n + u.prompt_tokens_details.cached_tokens, 0),
    outputTokens: sent.reduce((n, u) => n + u.completion_tokens, 0),
  };
}

describe("the usage ledger", () => {
  it("after a scripted conversation equals the provider's reported tokens exactly, cached included; cost matches the table; it survives eviction", async () => {
    const tenant = unique("ledger");
    // Agent a on the fake Chat Completions model (priced by MODEL_PROVIDERS), agent b on Anthropic Messages (priced by pi-ai's registry).
    expect((await worker(`/v1/tenants/${tenant}/agents/b/model`, { method: "PUT", headers: ADMIN, body: JSON.stringify({ model: "fake-anthropic/claude-sonnet-4-5" }) })).status).toBe(200);
    const steps: Record<string, ScriptStep[]> = {
      a: [
        { toolCalls: [{ name: "clock__now", arguments: {} }], usage: { input: 1200, cached: 300, output: 40 } },
        { text: "It is now.", usage: { input: 150, cached: 1400, output: 12 } },
        { text: "Again.", usage: { input: 90, cached: 1600, output: 7 } },
      ],
      b: [{ text: "Hello from b.", usage: { input: 500, cached: 2000, cacheWrite: 700, output: 33 } }],
    };
    const expected: Record<string, { input: number; cached: number; cacheWrite: number; output: number; calls: number }> = {};
    for (const [name, script_] of Object.entries(steps)) {
      const s = unique(`ledger-${name}`);
      await script(s, script_);
      await postMessage(tenant, name, { text: `[s:${s}] hi`, conversation: s });
      await settled(tenant, name, s);
      if (name === "a") {
        await postMessage(tenant, name, { text: `[s:${s}] again`, conversation: s });
        await waitFor("the second answer", async () => (await settled(tenant, name, s)).transcript.at(-1)?.text === "Again.");
      }
      const reported = (await providerRequests(s)).map((r) => r.usage!);
      expect(reported).toHaveLength(script_.length);
      expected[name] = { input: 0, cached: 0, cacheWrite: 0, output: 0, calls: reported.length };
      const e = expected[name]!;
      for (const sent of reported) {
        // Each API's own fields: Chat Completions counts cached tokens inside prompt_tokens; Anthropic apart.
        if (name === "a") {
          const details = sent.prompt_tokens_details as { cached_tokens: number };
          e.input += (sent.prompt_tokens as number) - details.cached_tokens;
          e.cached += details.cached_tokens;
          e.output += sent.completion_tokens as number;
        } else {
          e.input += sent.input_tokens as number;
          e.cached += sent.cache_read_input_tokens as number;
          e.cacheWrite += sent.cache_creation_input_tokens as number;
          e.output += sent.output_tokens as number;
        }
      }
    }
    expect(expected.a).toEqual({ input: 1440, cached: 3300, cacheWrite: 0, output: 59, calls: 3 });
    expect(expected.b).toEqual({ input: 500, cached: 2000, cacheWrite: 700, output: 33, calls: 1 });

    const check = async () => {
      const answer = await counted(tenant, 4);
      for (const [name, model] of [["a", "fake/test-model"], ["b", "fake-anthropic/claude-sonnet-4-5"]] as const) {
        const mine = answer.usage.filter((r) => r.agent === name);
        expect(new Set(mine.map((r) => r.model))).toEqual(new Set([model]));
        const sum = (k: "calls" | "inputTokens" | "cachedInputTokens" | "cacheWriteTokens" | "outputTokens" | "costUsd") => mine.reduce((n, r) => n + r[k], 0);
        const e = expected[name]!;
        expect([sum("calls"), sum("inputTokens"), sum("cachedInputTokens"), sum("cacheWriteTokens"), sum("outputTokens")]).toEqual([e.calls, e.input, e.cached, e.cacheWrite, e.output]);
        const cost = priced(model, e);
        expect(cost).toBeGreaterThan(0);
        near(sum("costUsd"), cost);
      }
      near(answer.totals.costUsd, priced("fake/test-model", expected.a!) + priced("fake-anthropic/claude-sonnet-4-5", expected.b!));
      near(answer.today.spentUsd, answer.totals.costUsd);
      return answer;
    };
    const before = await check();
    // The agent's own record of each call agrees with the ledger.
    const jobs = await rows<{ input_tokens: number; cache_read_tokens: number; output_tokens: number }>(tenant, "a", "SELECT input_tokens, cache_read_tokens, output_tokens FROM model_jobs");
    expect(jobs.reduce((n, j) => n + j.input_tokens + j.cache_read_tokens + j.output_tokens, 0)).toBe(1440 + 3300 + 59);
    // Busy time reached the ledger with the model jobs' claims.
    expect(before.busy.filter((b) => b.agent === "a").reduce((n, b) => n + b.passes, 0)).toBeGreaterThan(0);

    // Eviction of the ledger and the agents loses nothing and adds nothing.
    await runInDurableObject(ledgerStub(env, tenant), (_instance, state) => state.abort("evicted by the test")).catch(() => undefined);
    await evict(tenant, "a");
    const after = await check();
    expect(after.totals).toEqual(before.totals);
  });

  it("counts every answer the provider was paid for: a job delivered again and performed twice is counted twice, as billed", async () => {
    const tenant = unique("redeliver");
    const s = unique("redeliver");
    // The first delivery's call is held at the provider; the job is delivered again meanwhile, to another courier.
    await script(s, [
      { hold: true, text: "first", usage: { input: 1000, cached: 0, output: 100 } },
      { text: "second", usage: { input: 10, cached: 20, output: 5 } },
    ]);
    await postMessage(tenant, "a", { text: `[s:${s}] hi`, conversation: s });
    await waitFor("the held call", async () => (await providerRequests(s)).length === 1);
    const [job] = await rows<{ id: string }>(tenant, "a", "SELECT id FROM model_jobs WHERE status = 'pending'");
    // A lane whose courier is not the first one's (a courier takes one copy of an effect it holds).
    const courierOf = (lane: string) => courierStub(env, { tenant, agent: "a", lane }).id;
    let lane = "model:redelivered";
    while (courierOf(lane).equals(courierOf(`model:${s}`))) lane = `model:${unique("redelivered")}`;
    const again = { tenant, agent: "a", kind: "model" as const, id: job!.id, lane, attempt: 2 };
    await courierStub(env, again).take([again]);
    const view = await waitFor("the redelivered call's answer", async () => {
      const v = await settled(tenant, "a", s);
      return v.transcript.at(-1)?.text === "second" ? v : undefined;
    });
    // The conversation used one answer.
    expect(view.usage).toMatchObject({ inputTokens: 10 + 20, outputTokens: 5 });
    // The first call now answers too: its result is not used, but it was paid for.
    await releaseProvider(s);
    const first = courierStub(env, { ...again, lane: `model:${s}` });
    await waitFor("the first courier to finish", async () => (await runInDurableObject(first, (_i, state) => state.storage.getAlarm())) === null);
    expect((await providerRequests(s)).filter((r) => r.responded)).toHaveLength(2);
    expect((await usage(tenant)).totals).toMatchObject(billed(await providerRequests(s)));
    // The platform's total has both too: the tenant's ledger reported them (its alarm, run here now), and the platform's took every report.
    await runDurableObjectAlarm(ledgerStub(env, tenant));
    const reports = await runInDurableObject(ledgerStub(env, tenant), (_i, state) => state.storage.sql.exec<{ seq: number; days: string; sent: number }>("SELECT seq, days, sent FROM spend_reports ORDER BY seq").toArray());
    expect(reports.every((r) => r.sent === 1)).toBe(true);
    expect(reports.flatMap((r) => JSON.parse(r.days) as { calls: number }[]).reduce((n, d) => n + d.calls, 0)).toBe(2);
    const source = ledgerStub(env, tenant).id.toString();
    const taken = await runInDurableObject(ledgerStub(env), (_i, state) => state.storage.sql.exec<{ seq: number }>("SELECT seq FROM spend_sources WHERE source = ?", source).one().seq);
    expect(taken).toBe(reports.at(-1)!.seq);
  });

  it("an answer read, then its courier cut short while it finishes the streamed reply: the answer is counted with the one the re-run paid for", async () => {
    const s = unique("finishing");
    const team = slackId("T");
    const channel = slackId("C");
    const ts = newTs();
    // Its last piece, Q7Q, can only be in an update sent once the provider's stream has it all.
    const reply = "Streamed, then cut short before it was reported: Q7Q";
    await script(s, [
      { text: reply, argumentChunk: 3, chunkDelayMs: 100, usage: { input: 1000, cached: 0, output: 100 } },
      { text: reply, argumentChunk: 3, chunkDelayMs: 100, usage: { input: 10, cached: 20, output: 5 } },
    ]);
    // Slack's answer to the update with the last piece never comes: the courier has the paid answer and has not reported it.
    await holdSlack({ method: "chat.appendStream", channel, textIncludes: "Q7Q" });
    expect((await postEvent(messageEnvelope({ team, channel, ts, text: `[s:${s}] tell me` }))).status).toBe(200);
    await waitFor("the provider's answer to be read to its end", async () => (await providerRequests(s)).some((r) => r.usage));
    await waitFor("the last update to be held", async () => (await slackCalls(channel, "chat.appendStream")).some((c) => String(c.body.markdown_text).includes("Q7Q")));
    const conversation = conversationOf(team, channel, ts);
    await evictCourier(courier(team, AGENT, "model", conversation));
    // The watchdog resumes the job (on a new stub: the old one is broken): the model is asked again, paid again.
    expect(await runDurableObjectAlarm(courier(team, AGENT, "model", conversation))).toBe(true);
    await statusFinal(channel, "Done.");
    const requests = await providerRequests(s);
    expect(requests.filter((r) => r.usage)).toHaveLength(2);
    expect((await counted(team, 2)).totals).toMatchObject(billed(requests));
  });

  it("a job whose report is lost after the provider answered: the courier reports the answer it kept, and the ledger shows what was billed", async () => {
    const tenant = unique("lost");
    const s = unique("lost");
    await script(s, [
      { text: "first, reported again", usage: { input: 1000, cached: 0, output: 100 } },
      { text: "second, never asked", usage: { input: 10, cached: 20, output: 5 } },
    ]);
    // The courier's first report is lost on its way to the agent (as when the agent is unreachable): it keeps the answer and reports it again.
    await runInDurableObject(courier(tenant, "a", "model", s), (instance) => {
      Object.assign(instance, {
        report: async () => {
          Reflect.deleteProperty(instance, "report");
          throw new Error("the report was lost on its way");
        },
      });
    });
    await postMessage(tenant, "a", { text: `[s:${s}] hi`, conversation: s });
    const view = await waitFor("the kept answer", async () => {
      const v = await settled(tenant, "a", s);
      return v.transcript.at(-1)?.text === "first, reported again" ? v : undefined;
    }, 30_000);
    expect(view.transcript.filter((e) => e.role === "assistant").map((e) => e.text)).toEqual(["first, reported again"]);
    const requests = await providerRequests(s);
    expect(requests.filter((r) => r.responded)).toHaveLength(1);
    expect((await counted(tenant, 1)).totals).toMatchObject(billed(requests));
  });

  it("an answer cut off after it began is counted for what it reported: the prompt was billed", async () => {
    const tenant = unique("cut");
    expect((await worker(`/v1/tenants/${tenant}/model`, { method: "PUT", headers: ADMIN, body: JSON.stringify({ model: "fake-anthropic/claude-sonnet-4-5" }) })).status).toBe(200);
    const s = unique("cut");
    await script(s, [
      { cut: true, text: "never finished", usage: { input: 700, cached: 0, output: 0 } },
      { text: "whole", usage: { input: 40, cached: 0, output: 6 } },
    ]);
    await postMessage(tenant, "a", { text: `[s:${s}] hi`, conversation: s });
    const view = await waitFor("the second call's answer", async () => {
      const v = await settled(tenant, "a", s);
      return v.transcript.at(-1)?.text === "whole" ? v : undefined;
    });
    expect(view.status).toBe("idle");
    // What the fake reported for each: the cut one's message_start, the whole one's message_delta.
    const sent = (await providerRequests(s)).map((r) => r.usage as { input_tokens: number; output_tokens: number });
    expect(sent.map((u) => u.input_tokens)).toEqual([700, 40]);
    expect((await counted(tenant, 2)).totals).toMatchObject({ calls: 2, inputTokens: 740, outputTokens: sent[0]!.output_tokens + sent[1]!.output_tokens });
  });

  it("status shows the conversation's day and the tenant's day", async () => {
    const tenant = unique("status");
    expect((await setLimit(tenant, { dailyUsd: 2 })).status).toBe(200);
    const s = unique("status");
    await script(s, [{ text: "ok", usage: { input: 100, cached: 300, output: 20 } }]);
    await postMessage(tenant, "a", { text: `[s:${s}] hi`, conversation: s });
    await settled(tenant, "a", s);
    const other = unique("status");
    await script(other, [{ text: "ok", usage: { input: 50, cached: 0, output: 5 } }]);
    await postMessage(tenant, "b", { text: `[s:${other}] hi`, conversation: other });
    await settled(tenant, "b", other);
    await counted(tenant, 2);
    const res = await postMessage(tenant, "a", { kind: "command", command: "status", conversation: s });
    const { notice } = (await res.json()) as { notice: string };
    const cost = priced("fake/test-model", { input: 100, cached: 300, cacheWrite: 0, output: 20 });
    expect(notice).toMatch(/^Status: idle \(turn 1\)/);
    expect(notice).toContain(`This conversation today (UTC): 1 model calls, 400 tokens in (75% cached), 20 out, $${cost.toFixed(4)}, object busy `);
    const all = cost + priced("fake/test-model", { input: 50, cached: 0, cacheWrite: 0, output: 5 });
    expect(notice).toContain(`\nTenant ${tenant} today (UTC): 2 model calls, 450 tokens in (67% cached), 25 out, $${all.toFixed(4)}; spent $${all.toFixed(4)} of a $2.00 daily limit; object busy `);
  });

  it("a model without a price is counted in tokens, costs nothing, is logged once, and is named unpriced in status and the console", async () => {
    const tenant = unique("unpriced");
    expect((await worker(`/v1/tenants/${tenant}/model`, { method: "PUT", headers: ADMIN, body: JSON.stringify({ model: "fake/small-output" }) })).status).toBe(200);
    const lines = captureConsole();
    const conversations: string[] = [];
    try {
      for (let i = 0; i < 2; i++) {
        const s = unique("unpriced");
        conversations.push(s);
        await script(s, [{ text: "free", usage: { input: 100, cached: 0, output: 10 } }]);
        await postMessage(tenant, "a", { text: `[s:${s}] hi`, conversation: s });
        await settled(tenant, "a", s);
      }
    } finally {
      vi.restoreAllMocks();
    }
    const answer = await counted(tenant, 2);
    expect(answer.totals).toMatchObject({ calls: 2, inputTokens: 200, outputTokens: 20, costUsd: 0 });
    expect(lines.filter((l) => l.includes("model fake/small-output has no price"))).toHaveLength(1);
    const unpriced = "model fake/small-output has no price in the model table: its calls are counted in tokens but cost $0 here, so no spend limit can apply to them";
    const status = async (t: string, conversation: string) =>
      ((await (await postMessage(t, "a", { kind: "command", command: "status", conversation })).json()) as { notice: string }).notice;
    expect(await status(tenant, conversations[0]!)).toContain(`\nModel: fake/small-output.\nWarning: ${unpriced}`);
    const page = await (await worker(`/console/tenants/${tenant}`, { headers: { authorization: ADMIN.authorization } })).text();
    expect(page).toContain(`Unpriced: ${unpriced}`);
    // A priced model is named, without a warning.
    const pricedTenant = unique("priced");
    const s = unique("priced");
    await script(s, [{ text: "paid" }]);
    await postMessage(pricedTenant, "a", { text: `[s:${s}] hi`, conversation: s });
    await settled(pricedTenant, "a", s);
    const said = await status(pricedTenant, s);
    expect(said).toMatch(/\nModel: fake\/test-model\.(\n|$)/);
    expect(said).not.toContain("has no price");
    expect(await (await worker(`/console/tenants/${pricedTenant}`, { headers: { authorization: ADMIN.authorization } })).text()).not.toContain("Unpriced");
  });

  it("answers a range, and refuses a bad one with 400", async () => {
    const tenant = unique("range");
    expect((await worker(`/v1/tenants/${tenant}/usage?from=2026-12-02&to=2026-12-01`, { headers: ADMIN })).status).toBe(400);
    expect((await worker(`/v1/tenants/${tenant}/usage?from=yesterday`, { headers: ADMIN })).status).toBe(400);
    expect((await worker(`/v1/tenants/${tenant}/usage?from=2020-01-01&to=2026-01-01`, { headers: ADMIN })).status).toBe(400);
    expect((await worker(`/v1/tenants/${tenant}/usage?since=2026-01-01`, { headers: ADMIN })).status).toBe(400);
    const ok = await usage(tenant, "?from=2026-11-01&to=2026-11-30T12:00:00Z");
    expect(ok.totals.calls).toBe(0);
  });
});

describe("daily spend limits", () => {
  it("a tenant at its limit: the call never reaches the provider, the person is told once, another tenant's call goes through", async () => {
    const team = slackId("T");
    const other = slackId("T");
    expect((await setLimit(team, { dailyUsd: 0.0001 })).status).toBe(200);
    expect((await setLimit(other, { dailyUsd: 0.0001 })).status).toBe(200);
    const thread = async (tenant: string, steps: ScriptStep[]) => {
      const channel = slackId("C");
      const ts = newTs();
      const s = unique("limit");
      await script(s, steps);
      await postEvent(messageEnvelope({ team: tenant, channel, ts, text: `[s:${s}] hello` }));
      return { channel, s, conversation: conversationOf(tenant, channel, ts) };
    };
    // The first call goes through (nothing spent yet) and spends more than the limit.
    const first = await thread(team, [{ text: "Spent.", usage: { input: 1000, cached: 0, output: 100 } }]);
    await statusFinal(first.channel, "Done.");
    const spent = (await counted(team, 1)).today.spentUsd;
    expect(spent).toBeGreaterThanOrEqual(0.0001);

    const refused = await thread(team, [{ text: "never" }]);
    const passing = await thread(other, [{ text: "Other tenant answered." }]);
    await statusFinal(refused.channel, "Failed.");
    await statusFinal(passing.channel, "Done.");
    expect(await providerRequests(refused.s)).toEqual([]);
    const sentence = limitSentence(spent, 0.0001);
    expect(sentence).toMatch(/^Daily usage limit reached \(\$\d+\.\d{4} of \$0\.0001\); resets at 00:00 UTC\.$/);
    // The notice is posted after the status is updated: wait for it to be in the thread.
    const told = await waitFor("the refusal's notice", async () => {
      const messages = (await threadMessages(refused.channel)).map((m) => m.body.markdown_text);
      return messages.length > 0 && messages;
    });
    expect(told).toEqual([sentence]);
    expect((await threadMessages(passing.channel)).map((m) => m.body.markdown_text)).toEqual(["Other tenant answered."]);
    // Not retried: the turn failed once, its job settled, nothing left to send.
    const view = await settled(team, AGENT, refused.conversation);
    expect(view.error).toBe(sentence);
    expect(await rows(team, AGENT, "SELECT kind, id FROM effects")).toEqual([]);
    expect(await providerRequests(refused.s)).toEqual([]);
  });

  it("a BYOK tenant and an exempt tenant are not refused by the operator's limits; the deployment default and the platform limit refuse the rest", async () => {
    const byok = unique("byok");
    const exempt = unique("exempt");
    const own = unique("own");
    const plain = unique("plain");
    expect((await worker(`/v1/tenants/${byok}/model`, { method: "PUT", headers: ADMIN, body: JSON.stringify({ model: "fake/test-model", secret: "FAKE_PROVIDER_KEY" }) })).status).toBe(200);
    expect((await setLimit(byok, { dailyUsd: 0 })).status).toBe(200);
    expect((await setLimit(exempt, { dailyUsd: 0, exempt: true })).status).toBe(200);
    expect((await setLimit(own, { dailyUsd: 5 })).status).toBe(200);
    expect((await setLimit(plain, { dailyUsd: -1 })).status).toBe(400);

    const ask = async (tenant: string) => {
      const s = unique("ask");
      await script(s, [{ text: "answered", usage: { input: 100, cached: 0, output: 10 } }]);
      await postMessage(tenant, "a", { text: `[s:${s}] hi`, conversation: s });
      const view = await settled(tenant, "a", s);
      return { view, reached: (await providerRequests(s)).length };
    };
    await withVars({ DAILY_SPEND_LIMIT_USD: "0" }, async () => {
      const refused = await ask(plain);
      expect(refused.reached).toBe(0);
      expect(refused.view.error).toBe(limitSentence(0, 0));
      expect((await ask(own)).view.status).toBe("idle");
      expect((await ask(byok)).view.status).toBe("idle");
      expect((await ask(exempt)).view.status).toBe("idle");
    });
    await withVars({ PLATFORM_DAILY_SPEND_LIMIT_USD: "0" }, async () => {
      const refused = await ask(own);
      expect(refused.reached).toBe(0);
      expect(refused.view.error).toMatch(/^Daily usage limit reached \(\$[\d.]+ of \$0\.00\); resets at 00:00 UTC\.$/);
      expect((await ask(byok)).view.status).toBe("idle");
    });
    // BYOK usage is the tenant's, not the operator's spend.
    const mine = await counted(byok, 2);
    expect(mine.totals.calls).toBe(2);
    expect(mine.usage.every((r) => r.byok)).toBe(true);
    expect(mine.totals.byokCostUsd).toBeGreaterThan(0);
    expect(mine.today.spentUsd).toBe(0);
  });
});

// Each pi-ai API end to end: the object writes a model job, the real queue
// delivers it, the consumer calls the loopback fake in that API's wire protocol
// (test/fakes/model-protocols.mjs), and the reply, its tool call and its usage
// come back to the object. One tenant per API, each chosen through the admin API.
import { env } from "cloudflare:workers";
import { beforeAll, describe, expect, it } from "vitest";
import { modelChoice, callModel, DEFAULT_MODEL_SETTINGS, modelSettings, providerSchema, type ModelChoice, type ModelSettings } from "../../../runtime/models/index.ts";
// pi-ai's registry itself, by path: the Worker's bundle and these tests have none in pi-ai's models.js (wrangler.jsonc, "alias").
import { MODELS } from "../../../node_modules/@mariozechner/pi-ai/dist/models.generated.js";
import type { AssistantMessage } from "@mariozechner/pi-ai";
import { agent, rows } from "../../agents.ts";
import { chooseModels, getConversation, postMessage, providerRequests, releaseProvider, script, settled, unique, waitFor } from "../../support.ts";

const AGENT = "speaker";
/** One tenant per API, each on a model of that API's fake provider. */
const tenantModels: Record<string, string> = {
  "api-completions": "fake/test-model",
  "api-responses": "fake-responses/gpt-4.1-mini",
  "api-anthropic": "fake-anthropic/claude-sonnet-4-5",
  "api-gemini": "fake-gemini/gemini-2.5-flash",
};

beforeAll(() => chooseModels(tenantModels));

/** What each API's usage fields mean, as pi-ai reports them: input excludes cached tokens. */
type Wire = Record<string, number> & { input_tokens_details?: { cached_tokens: number }; prompt_tokens_details?: { cached_tokens: number } };
type Body = Record<string, unknown> & { max_tokens?: number; max_completion_tokens?: number; max_output_tokens?: number };
const APIS = [
  {
    api: "openai-completions",
    tenant: "api-completions",
    maxTokens: (body: Body) => body.max_completion_tokens ?? body.max_tokens,
    usage: (u: Wire) => ({ input: u.prompt_tokens! - u.prompt_tokens_details!.cached_tokens, cacheRead: u.prompt_tokens_details!.cached_tokens, cacheWrite: 0, output: u.completion_tokens! }),
  },
  {
    api: "openai-responses",
    tenant: "api-responses",
    maxTokens: (body: Body) => body.max_output_tokens,
    usage: (u: Wire) => ({ input: u.input_tokens! - u.input_tokens_details!.cached_tokens, cacheRead: u.input_tokens_details!.cached_tokens, cacheWrite: 0, output: u.output_tokens! }),
  },
  {
    api: "anthropic-messages",
    tenant: "api-anthropic",
    maxTokens: (body: Body) => body.max_tokens,
    usage: (u: Wire) => ({ input: u.input_tokens!, cacheRead: u.cache_read_input_tokens!, cacheWrite: u.cache_creation_input_tokens!, output: u.output_tokens! }),
  },
  {
    api: "google-generative-ai",
    tenant: "api-gemini",
    maxTokens: (body: Body) => (body.generationConfig as { maxOutputTokens?: number } | undefined)?.maxOutputTokens,
    usage: (u: Wire) => ({ input: u.promptTokenCount! - u.cachedContentTokenCount!, cacheRead: u.cachedContentTokenCount!, cacheWrite: 0, output: u.candidatesTokenCount! }),
  },
] as const;

/** The tenant's model choice, resolved exactly as the consumer resolves it. */
function choiceFor(tenant: string): Extract<ModelChoice, { kind: "provider" }> {
  const choice = modelChoice(env, { model: tenantModels[tenant]! });
  if (choice.kind !== "provider") throw new Error(`no provider for ${tenant}`);
  return choice;
}

/** A reply as pi-ai returns it, `tokens` in and out. */
function reply(text: string, tokens: number): AssistantMessage {
  const usage = { input: tokens, output: tokens, cacheRead: 0, cacheWrite: 0, totalTokens: 0, cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 } };
  return { role: "assistant", content: [{ type: "text", text }], api: "x", provider: "x", model: "x", usage, stopReason: "stop", timestamp: 0 };
}

function priced(usage: { input: number; cacheRead: number; cacheWrite: number; output: number }, settings: ModelSettings): number {
  const { cost } = settings;
  return (usage.input * cost.input + usage.cacheRead * cost.cacheRead + usage.cacheWrite * cost.cacheWrite + usage.output * cost.output) / 1e6;
}

describe.each(APIS)("$api", ({ api, tenant, usage: wireUsage, maxTokens }) => {
  it("a turn with a tool call: arguments streamed in pieces, the result sent back, the answer recorded", async () => {
    const s = unique("tool");
    await script(s, [{ text: "Let me look.", toolCalls: [{ name: "ledger__read", arguments: { entry: "apples" } }] }, { echoToolResults: true }]);
    await postMessage(tenant, AGENT, { text: `[s:${s}] how many apples?`, conversation: s });
    const view = await settled(tenant, AGENT, s);
    expect(view.status).toBe("idle");
    expect(view.transcript.map((e) => e.role)).toEqual(["user", "assistant", "tool", "assistant"]);
    expect(view.transcript[1]).toMatchObject({ text: "Let me look.", toolCalls: [{ name: "ledger__read", arguments: { entry: "apples" } }] });
    expect(view.transcript[2]!.text).toBe('0 entries for "apples"');
    // The fake repeats the tool results it found in the second request, in the API's own format.
    expect(view.transcript[3]!.text).toBe('0 entries for "apples"');
    const requests = await providerRequests(s);
    expect(requests.map((r) => [r.api, r.authorized])).toEqual([
      [api, true],
      [api, true],
    ]);
    // The table's output limit is what each request asks for.
    expect(requests.map((r) => maxTokens(r.body))).toEqual([choiceFor(tenant).settings.maxTokens, choiceFor(tenant).settings.maxTokens]);
  });

  it("a 400 fails the turn at once with the provider's message, and is not retried", async () => {
    const s = unique("r400");
    // (A refusal for length is not a failure: runtime-compaction.test.ts.)
    await script(s, [{ status: 400, error: "messages.0.content: unsupported value" }, { text: "must never be asked" }]);
    await postMessage(tenant, AGENT, { text: `[s:${s}] hi`, conversation: s });
    const view = await settled(tenant, AGENT, s);
    expect(view.status).toBe("failed");
    expect(view.error).toBe("the model provider refused the request (400 messages.0.content: unsupported value)");
    expect(await providerRequests(s)).toHaveLength(1);
    expect(await rows(tenant, AGENT, "SELECT status FROM model_jobs WHERE conversation = ?", s)).toEqual([{ status: "failed" }]);
  });

  it("the job keeps the tokens the provider reported, cached ones included, priced by the model table", async () => {
    const s = unique("usage");
    const cacheWrite = api === "anthropic-messages" ? 2048 : 0; // only Anthropic reports cache writes
    await script(s, [{ text: "From the cache.", usage: { input: 321, cached: 4096, cacheWrite, output: 77 } }]);
    await postMessage(tenant, AGENT, { text: `[s:${s}] hi`, conversation: s });
    expect((await settled(tenant, AGENT, s)).status).toBe("idle");

    const [request] = await providerRequests(s);
    const reported = wireUsage(request!.usage as Wire);
    expect(reported).toEqual({ input: 321, cacheRead: 4096, cacheWrite, output: 77 }); // the fake said what it was told
    const { settings, provider, model } = choiceFor(tenant);
    expect(settings.cost.input).toBeGreaterThan(0);
    expect(settings.cost.cacheRead).toBeGreaterThan(0);
    const [job] = await rows(tenant, AGENT, "SELECT model, input_tokens, cache_read_tokens, cache_write_tokens, output_tokens, cost FROM model_jobs WHERE conversation = ?", s);
    expect(job).toEqual({
      model: `${provider.id}/${model}`,
      input_tokens: reported.input,
      cache_read_tokens: reported.cacheRead,
      cache_write_tokens: reported.cacheWrite,
      output_tokens: reported.output,
      cost: expect.closeTo(priced(reported, settings), 12),
    });
  });
});

describe("usage kept with the job", () => {
  it("a late reply to a stopped turn still records what it used, once", async () => {
    const tenant = "api-anthropic";
    const s = unique("late");
    await script(s, [{ hold: true, text: "LATE", usage: { input: 10, cached: 900, cacheWrite: 50, output: 20 } }]);
    await postMessage(tenant, AGENT, { text: `[s:${s}] count to a million`, conversation: s });
    await waitFor("the model call", async () => (await providerRequests(s)).length === 1);
    await postMessage(tenant, AGENT, { text: "stop", conversation: s, kind: "interrupt" });
    await releaseProvider(s);

    const usageOf = () => rows<{ id: string; status: string; input_tokens: number; cache_read_tokens: number; cache_write_tokens: number; output_tokens: number }>(
      tenant, AGENT, "SELECT id, status, input_tokens, cache_read_tokens, cache_write_tokens, output_tokens FROM model_jobs WHERE conversation = ?", s);
    const [job] = await waitFor("the late reply's usage", async () => ((await usageOf())[0]?.output_tokens ? usageOf() : undefined));
    expect(job).toMatchObject({ status: "discarded", input_tokens: 10, cache_read_tokens: 900, cache_write_tokens: 50, output_tokens: 20 });
    expect((await getConversation(tenant, AGENT, s)).transcript.map((e) => e.text)).not.toContain("LATE");

    expect(await agent(tenant, AGENT).report({ tenant, agent: AGENT }, "model", job!.id, { call: { kind: "reply", message: reply("LATE", 999) } })).toMatchObject({ taken: false });
    expect(await usageOf()).toEqual([job]);
  });
});

describe("prompt caching", () => {
  it("Anthropic requests carry cache_control breakpoints on the tools, the system prompt and the last message", async () => {
    const s = unique("cache");
    await script(s, [{ toolCalls: [{ name: "ledger__read", arguments: { entry: "pears" } }] }, { text: "Done." }]);
    await postMessage("api-anthropic", AGENT, { text: `[s:${s}] how many pears?`, conversation: s });
    expect((await settled("api-anthropic", AGENT, s)).status).toBe("idle");

    type Block = { type: string; cache_control?: unknown };
    type Body = { system: Block[]; tools: Block[]; messages: { role: string; content: string | Block[] }[] };
    const bodies = (await providerRequests(s)).map((r) => r.body as unknown as Body);
    expect(bodies).toHaveLength(2);
    const ephemeral = { type: "ephemeral" };
    for (const body of bodies) {
      expect(body.system.map((b) => b.cache_control)).toEqual([ephemeral]);
      expect(body.tools.map((t) => t.cache_control ?? null)).toEqual([...body.tools.slice(1).map(() => null), ephemeral]);
      const marked = body.messages.flatMap((m, i) => (Array.isArray(m.content) ? m.content.map((b, j) => (b.cache_control ? [i, j] : null)) : [])).filter(Boolean);
      const last = body.messages.at(-1)!;
      expect(marked).toEqual([[body.messages.length - 1, (last.content as Block[]).length - 1]]);
    }
    // The second call's prefix is the first call's plus the reply and the tool result, which now carries the breakpoint.
    expect((bodies[1]!.messages.at(-1)!.content as Block[]).at(-1)!.type).toBe("tool_result");
  });

  it("OpenAI Responses requests carry one prompt_cache_key per agent", async () => {
    const s = unique("cachekey");
    await script(s, [{ toolCalls: [{ name: "clock__now" }] }, { text: "Now." }]);
    await postMessage("api-responses", AGENT, { text: `[s:${s}] time?`, conversation: s });
    expect((await settled("api-responses", AGENT, s)).status).toBe("idle");
    expect((await providerRequests(s)).map((r) => r.body.prompt_cache_key)).toEqual([`api-responses/${AGENT}`, `api-responses/${AGENT}`]);
  });
});

describe("callModel's answer for a failed call", () => {
  const request = (s: string) => ({ model: { model: "unused" }, systemPrompt: "Be brief.", messages: [{ role: "user" as const, content: `[s:${s}] hi`, timestamp: Date.now() }], tools: [] });

  it("a 429 is retried, after Gemini's RetryInfo delay where it gives one", async () => {
    const s = unique("r429");
    await script(s, [{ status: 429, error: "Resource has been exhausted", retryDelay: "6.2s" }]);
    expect(await callModel(env, choiceFor("api-gemini"), request(s))).toEqual({ kind: "retry", status: 429, retryAfterSeconds: 7, error: "429 Resource has been exhausted" });
    await script(s, [{ status: 429, error: "Number of request tokens has exceeded your per-minute rate limit" }]);
    expect(await callModel(env, choiceFor("api-anthropic"), request(s))).toMatchObject({ kind: "retry", status: 429, retryAfterSeconds: undefined });
  });

  it("each API's word on when to come back is read from its headers: retry-after (seconds or a date), retry-after-ms, a used-up limit's x-ratelimit-reset", async () => {
    const s = unique("word");
    const asked = async (tenant: string, status: number, headers: Record<string, string>) => {
      await script(s, [{ status, error: "Rate limit reached", headers }]);
      const call = await callModel(env, choiceFor(tenant), request(s));
      expect(call).toMatchObject({ kind: "retry", status });
      return call.kind === "retry" ? call.retryAfterSeconds : undefined;
    };
    expect(await asked("api-anthropic", 429, { "retry-after": "20" })).toBe(20);
    expect(await asked("api-completions", 429, { "retry-after-ms": "1500", "retry-after": "9" })).toBe(2);
    expect(await asked("api-responses", 429, { "x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "6m0s", "x-ratelimit-remaining-tokens": "900", "x-ratelimit-reset-tokens": "1s" })).toBe(360);
    expect(await asked("api-completions", 429, { "x-ratelimit-remaining-tokens": "0", "x-ratelimit-reset-tokens": "1m2.5s" })).toBe(63);
    // An OpenAI-compatible gateway that names a date.
    const wait = await asked("api-completions", 503, { "retry-after": new Date(Date.now() + 30_000).toUTCString() });
    expect(wait).toBeGreaterThanOrEqual(28);
    expect(wait).toBeLessThanOrEqual(31);
    expect(await asked("api-anthropic", 429, {})).toBeUndefined();
  });

  it("a 400 whose body carries code context_length_exceeded is too long for the model, whatever its words", async () => {
    const s = unique("code");
    await script(s, [{ status: 400, code: "context_length_exceeded", error: "Request rejected: shorten your conversation and try once more." }]);
    expect(await callModel(env, choiceFor("api-completions"), request(s))).toMatchObject({ kind: "refused", status: 400, tooLong: true });
    await script(s, [{ status: 400, code: "invalid_value", error: "Request rejected: shorten your conversation and try once more." }]);
    const other = await callModel(env, choiceFor("api-completions"), request(s));
    expect(other).toMatchObject({ kind: "refused", status: 400 });
    expect(other.kind === "refused" && other.tooLong).toBeFalsy();
  });

  it("OpenAI's 429 insufficient_quota (a key out of credit) is a refusal, not a rate limit to wait out", async () => {
    const s = unique("quota");
    await script(s, [{ status: 429, code: "insufficient_quota", error: "You exceeded your current quota, please check your plan and billing details." }]);
    expect(await callModel(env, choiceFor("api-completions"), request(s))).toMatchObject({ kind: "refused", status: 429 });
  });

  it("the object retries a job after the delay the provider asked for, counting no failed attempt", async () => {
    const route = { tenant: "api-gemini", agent: "patient" };
    const s = unique("wait");
    await script(s, [{ status: 429, error: "Resource has been exhausted", retryDelay: "42s" }]);
    await postMessage(route.tenant, route.agent, { text: `[s:${s}] hi`, conversation: s });
    const [retry] = await waitFor("the retry to be scheduled", async () => {
      // Sent once, and waiting again (before its first send the job's effect waits too, due at once).
      const waiting = await rows<{ due_at: number }>(route.tenant, route.agent, "SELECT due_at FROM effects WHERE conversation = ? AND state = 'waiting' AND retries = 0 AND first_sent_at IS NOT NULL", s);
      return waiting.length > 0 && waiting;
    });
    // 42 s from when the 429 came back (a few seconds of slack for a loaded machine), not the 0 s backoff the tests configure.
    expect(retry!.due_at - Date.now()).toBeGreaterThan(35_000);
    expect(retry!.due_at - Date.now()).toBeLessThanOrEqual(42_000);
  });

  it.each(APIS)("$api: a wrong key is refused, the way the real API refuses it", async ({ tenant }) => {
    const s = unique("key");
    await script(s, [{ text: "never" }]);
    const wrongKey = Object.create(env, { FAKE_PROVIDER_KEY: { value: "not-the-key" } }) as Env;
    const call = await callModel(wrongKey, choiceFor(tenant), request(s));
    expect(call).toMatchObject({ kind: "refused", status: tenant === "api-gemini" ? 400 : 401 });
    // The OpenAI fakes echo the key they were given, as a careless gateway would.
    expect(JSON.stringify(call)).not.toContain("not-the-key");
    expect((await providerRequests(s)).map((r) => r.authorized)).toEqual([false]);
  });
});

describe("the model table", () => {
  const provider = (entry: Record<string, unknown>) => providerSchema.parse({ baseUrl: "https://gw.example/v1", ...entry });
  type Known = { api: string; contextWindow: number; maxTokens: number; cost: ModelSettings["cost"]; input: string[]; reasoning: boolean; thinkingLevelMap?: unknown; compat?: unknown };
  const models = MODELS as unknown as Record<string, Record<string, Known>>;
  const registry = (vendor: string, id: string) => models[vendor]![id]!;

  it("is seeded from pi-ai's registry, under the provider's own id first, then the API's vendor", () => {
    const claude = registry("anthropic", "claude-sonnet-4-5");
    expect(modelSettings(provider({ id: "my-anthropic", api: "anthropic-messages" }), "claude-sonnet-4-5")).toMatchObject({
      contextWindow: claude.contextWindow,
      maxTokens: claude.maxTokens,
      cost: claude.cost,
      images: claude.input.includes("image"),
    });
    const routed = registry("openrouter", "anthropic/claude-sonnet-4.5");
    expect(modelSettings(provider({ id: "openrouter" }), "anthropic/claude-sonnet-4.5")).toMatchObject({ contextWindow: routed.contextWindow, cost: routed.cost });
  });

  it("knows every model of pi-ai's registry as pi-ai does: registry.json is pi-ai's, reduced to what the table reads (scripts/model-registry.mjs)", () => {
    let checked = 0;
    for (const [vendor, known] of Object.entries(models)) {
      for (const [id, model] of Object.entries(known)) {
        // Under an API of its own its compat flags hold; under another they do not carry over.
        const apis = providerSchema.safeParse({ id: vendor, baseUrl: "https://gw.example", api: model.api }).success ? [...new Set([model.api, "openai-completions"])] : ["openai-completions"];
        for (const api of apis) {
          const row = modelSettings(provider({ id: vendor, api }), id);
          const said = `${vendor}/${id} as ${api}`;
          expect(row, said).toMatchObject({ contextWindow: model.contextWindow, maxTokens: model.maxTokens, cost: model.cost, reasoning: model.reasoning });
          expect(row.images, said).toBe(model.input.includes("image"));
          expect(row.thinkingLevelMap, said).toEqual(model.thinkingLevelMap);
          expect(row.compat, said).toEqual(model.api === api ? model.compat : undefined);
          checked++;
        }
      }
    }
    expect(checked).toBeGreaterThan(900);
  });

  it("gives an unknown model the conservative defaults", () => {
    expect(modelSettings(provider({ id: "gw" }), "home-made-7b")).toEqual(DEFAULT_MODEL_SETTINGS);
  });

  it("is overridden provider-wide, then per model, a price field by field", () => {
    const gw = provider({ id: "openai", contextWindow: 64_000, cost: { input: 9 }, models: { "gpt-4.1-mini": { maxTokens: 1000, cost: { output: 7 } } } });
    const known = registry("openai", "gpt-4.1-mini");
    expect(modelSettings(gw, "gpt-4.1-mini")).toMatchObject({ contextWindow: 64_000, maxTokens: 1000, cost: { ...known.cost, input: 9, output: 7 } });
    expect(modelSettings(gw, "gpt-4.1")).toMatchObject({ contextWindow: 64_000, maxTokens: registry("openai", "gpt-4.1").maxTokens });
  });

  it("MODEL_PROVIDERS is refused with the field named: an unknown api, a misspelt override, a repeated id", () => {
    const choose = (providers: unknown[]) => () =>
      modelChoice(Object.create(env, { MODEL_PROVIDERS: { value: JSON.stringify(providers) }, HARNESS_MODEL: { value: "gw/m" } }) as Env);
    expect(choose([{ id: "gw", baseUrl: "https://gw.example", api: "bedrock" }])).toThrow(/MODEL_PROVIDERS is invalid[\s\S]*api/);
    expect(choose([{ id: "gw", baseUrl: "https://gw.example", models: { m: { contextwindow: 1 } } }])).toThrow(/MODEL_PROVIDERS is invalid[\s\S]*contextwindow/);
    expect(choose([{ id: "gw", baseUrl: "https://gw.example" }, { id: "gw", baseUrl: "https://other.example" }])).toThrow(/provider ids must be unique/);
  });
});

// A fake model provider on loopback that speaks each pi-ai API's wire protocol
// (model-protocols.mjs): OpenAI Chat Completions and Responses, Anthropic
// Messages, Gemini streamGenerateContent. Tests script it per scenario: a user
// message containing "[s:<id>]" selects scenario <id>; each request takes the
// scenario's next step (the last repeats): { text?, toolCalls?, usage? } |
// { status, error, headers?, retryDelay?, code? } | { hold: true, … } |
// { echoToolResults: true }. Every request is recorded with its API, the body,
// whether its key was right, the usage reported, and when it arrived and when
// its answer ended (at, endedAt). Control API under /_control.
// A Chat Completions step may also ask for `argumentChunk: n` (arguments and
// text cut into pieces of n characters, mid-JSON) and `interleave: true`
// (parallel tool calls sent round-robin, chunk by chunk).
// A Gemini step may ask for `errorInStream: <code>`: a 200 whose body is an error object.
// An Anthropic Messages step may ask for `cut: true`: its stream is cut off
// right after message_start (which reports the usage billed so far).
// A Chat Completions step may ask for `holdAfter: n`: its text stops after n
// pieces until the scenario is released, as a model that thinks mid-answer.
// Any step may take `delayMs` before it answers, as a slow model does (and,
// on Chat Completions, `chunkDelayMs` between pieces of its text); an
// unscripted request gets `PUT /_control/unscripted {delayMs}`'s delay. The
// most requests ever in flight at once: GET /_control/concurrency (POST resets).
// A scenario put with `by: "position"` answers each request by its place in
// the conversation (the number of assistant messages it carries), so a request
// sent again after a crash gets the same answer.
// A rate limit, as a provider keeps one per key: `PUT /_control/busy/<prefix>
// {waitMs, forMs?, key?}` makes every request of a scenario whose id starts
// with <prefix>, made with that key (default the operator's), answer 429 for
// forMs from the first such request (or until `POST …/lift`), each 429
// announcing "come back in waitMs" in its API's own way. `GET
// /_control/busy/<prefix>` → { requests: [{ at, scenario, key, status }],
// windows: [{ from, to }] }: what arrived when, and the windows announced.
import { listen, readBody, sendJson } from "./http.mjs";
import { FAKE_PROVIDER_KEY, FAKE_TENANT_KEY, PROTOCOLS, usageOf } from "./model-protocols.mjs";

export { FAKE_PROVIDER_KEY, FAKE_TENANT_KEY };

/** The Worker's variables that make `provider` its one model provider, "fake", whose fake/test-model is the default. */
export const onlyProviderVars = (provider) => ({
  MODEL_PROVIDERS: JSON.stringify([{ id: "fake", baseUrl: `${provider.url}/v1`, auth: { secret: "FAKE_PROVIDER_KEY" }, models: { "test-model": {} } }]),
  HARNESS_MODEL: "fake/test-model",
  FAKE_PROVIDER_KEY,
});

export async function startModelProvider({ gates } = {}) {
  /** id → { steps, next, requests, gates: resolvers waiting for release } */
  const scenarios = new Map();
  const unscripted = [];
  const unscriptedStep = { delayMs: 0 };
  const concurrency = { now: 0, max: 0 };
  /** prefix → { forMs, waitMs, key, startedAt, requests, windows } */
  const busy = new Map();
  const scenario = (id) => {
    if (!scenarios.has(id)) scenarios.set(id, { steps: [], by: "order", next: 0, requests: [], waiting: [], credits: 0 });
    return scenarios.get(id);
  };

  return listen(async (req, res) => {
    const url = new URL(req.url, "http://x");
    const control = /^\/_control\/scenarios\/([^/]+)(?:\/(requests|release))?$/.exec(url.pathname);
    if (control) {
      const s = scenario(decodeURIComponent(control[1]));
      if (req.method === "PUT" && !control[2]) {
        const { steps, by = "order" } = JSON.parse(await readBody(req));
        Object.assign(s, { steps, by, next: 0, requests: [], waiting: [], credits: 0 });
        return sendJson(res, 200, { ok: true });
      }
      if (req.method === "GET" && control[2] === "requests") return sendJson(res, 200, s.requests);
      if (req.method === "POST" && control[2] === "release") {
        // A release that comes before its held call is kept for it.
        const waiting = s.waiting.shift();
        if (waiting) waiting();
        else s.credits++;
        return sendJson(res, 200, { ok: true });
      }
    }
    const busyControl = /^\/_control\/busy\/([^/]+?)(\/lift)?$/.exec(url.pathname);
    if (busyControl) {
      const prefix = decodeURIComponent(busyControl[1]);
      if (req.method === "PUT") {
        const { forMs = Infinity, waitMs, key = FAKE_PROVIDER_KEY } = JSON.parse(await readBody(req));
        busy.set(prefix, { forMs, waitMs, key, startedAt: null, requests: [], windows: [] });
        return sendJson(res, 200, { ok: true });
      }
      if (req.method === "POST" && busyControl[2] && busy.has(prefix)) {
        busy.get(prefix).forMs = 0;
        return sendJson(res, 200, { ok: true });
      }
      const b = busy.get(prefix);
      return sendJson(res, 200, b ? { requests: b.requests, windows: b.windows } : { requests: [], windows: [] });
    }
    if (url.pathname === "/_control/unscripted" && req.method === "PUT") {
      Object.assign(unscriptedStep, JSON.parse(await readBody(req)));
      return sendJson(res, 200, { ok: true });
    }
    if (url.pathname === "/_control/concurrency") {
      if (req.method === "POST") concurrency.max = concurrency.now;
      return sendJson(res, 200, concurrency);
    }
    const protocol = req.method === "POST" ? PROTOCOLS.find((p) => p.matches(url.pathname, url)) : undefined;
    if (!protocol) return sendJson(res, 404, { error: "not found" });

    const body = JSON.parse(await readBody(req));
    const id = /\[s:([A-Za-z0-9_-]+)\]/.exec(JSON.stringify(body))?.[1];
    const record = { api: protocol.api, path: url.pathname, body, authorized: protocol.authorized(req, url), headers: withoutKeys(req.headers), at: Date.now() };
    if (id) scenario(id).requests.push(record);
    else unscripted.push(record);
    if (!record.authorized) return protocol.unauthorized(res, req);
    const key = protocol.keyOf(req, url);
    // Whose key it was (never the key itself): the operator's, or the tenant's own.
    record.key = key === FAKE_PROVIDER_KEY ? "operator" : "tenant";
    const limit = id ? [...busy].find(([prefix]) => id.startsWith(prefix))?.[1] : undefined;
    if (limit) {
      const arrived = { at: Date.now(), scenario: id, key: key === FAKE_PROVIDER_KEY ? "operator" : "tenant", status: 200 };
      limit.requests.push(arrived);
      limit.startedAt ??= key === limit.key ? arrived.at : null;
      if (key === limit.key && arrived.at - limit.startedAt < limit.forMs) {
        arrived.status = 429;
        record.responded = true;
        const from = Date.now();
        limit.windows.push({ from, to: from + limit.waitMs });
        return protocol.rateLimited(res, limit.waitMs);
      }
    }

    const s = id ? scenario(id) : null;
    const position = (body.messages ?? []).filter((m) => m.role === "assistant").length;
    const index = !s ? 0 : s.by === "position" ? position : s.next++;
    const step = s && s.steps.length ? s.steps[Math.min(index, s.steps.length - 1)] : { ...unscriptedStep, text: `ok: ${protocol.lastUserText(body)}` };
    concurrency.max = Math.max(concurrency.max, ++concurrency.now);
    try {
      await gates?.pass("provider", { scenario: id, position });
      if (step.delayMs) await new Promise((resolve) => setTimeout(resolve, step.delayMs));
      const held = async () => {
        if (s.credits > 0) s.credits--;
        else await new Promise((resolve) => s.waiting.push(resolve));
      };
      if (step.hold) await held();
      if (step.status) {
        record.responded = true;
        return protocol.error(res, step.status, step.error ?? `status ${step.status}`, step.headers ?? {}, step);
      }
      // A careless model: it repeats what its tools returned, so a leak in a tool result reaches the chat.
      const reply = step.echoToolResults ? { text: protocol.toolResultsText(body) } : { ...step, held };
      record.usage = await protocol.stream(res, body, reply, usageOf(step), url);
      record.responded = true;
      record.endedAt = Date.now();
    } finally {
      concurrency.now--;
    }
  });
}

/** The request's headers as recorded: a key is checked, never kept. */
function withoutKeys(headers) {
  const kept = { ...headers };
  for (const name of ["authorization", "x-api-key", "x-goog-api-key"]) if (name in kept) kept[name] = "[checked]";
  return kept;
}

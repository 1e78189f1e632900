// A fake OpenAI-compatible provider on loopback: POST /v1/chat/completions with
// SSE streaming, as pi-ai speaks it. Tests script it per scenario: a user
// message containing "[s:<id>]" selects scenario <id>; each request takes the
// scenario's next step (the last repeats): { text } | { toolCalls } |
// { status, error } | { hold: true, … } | { echoToolResults: true }. A scenario put
// with `by: "position"` answers each request by its place in the conversation
// (the number of assistant messages it carries), so a request sent again after
// a crash gets the same answer. Control API under /_control.
import { listen, readBody, sendJson } from "./http.mjs";

export const FAKE_PROVIDER_KEY = "fake-provider-key-for-tests";

export async function startModelProvider({ gates } = {}) {
  /** id → { steps, next, requests, gates: resolvers waiting for release } */
  const scenarios = new Map();
  const unscripted = [];
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
    if (req.method !== "POST" || url.pathname !== "/v1/chat/completions") return sendJson(res, 404, { error: "not found" });

    const raw = await readBody(req);
    const body = JSON.parse(raw);
    const auth = req.headers.authorization ?? "";
    const id = findScenario(body.messages);
    const record = { body, authorized: auth === `Bearer ${FAKE_PROVIDER_KEY}`, at: Date.now() };
    if (id) scenario(id).requests.push(record);
    else unscripted.push(record);
    if (!record.authorized) return sendJson(res, 401, { error: { message: "Incorrect API key provided", type: "invalid_request_error" } });

    const s = id ? scenario(id) : null;
    const position = (body.messages ?? []).filter((m) => m.role === "assistant").length;
    const index = !s ? 0 : s.by === "position" ? position : s.next++;
    const step = s && s.steps.length ? s.steps[Math.min(index, s.steps.length - 1)] : { text: `ok: ${lastUserText(body.messages)}` };
    await gates?.pass("provider", { scenario: id, position });
    if (step.hold) {
      if (s.credits > 0) s.credits--;
      else await new Promise((resolve) => s.waiting.push(resolve));
    }
    if (step.status) {
      record.responded = true;
      return sendJson(res, step.status, { error: { message: step.error ?? `status ${step.status}`, type: "fake_error" } }, step.headers ?? {});
    }
    // A careless model: it repeats what its tools returned, so a leak in a tool result reaches the chat.
    const reply = step.echoToolResults ? { text: toolResultsText(body.messages) } : step;
    streamCompletion(res, body.model, reply);
    record.responded = true;
  });
}

function contentText(content) {
  if (typeof content === "string") return content;
  if (Array.isArray(content)) return content.map((c) => c.text ?? "").join("");
  return "";
}

function findScenario(messages) {
  for (const m of messages ?? []) {
    const found = /\[s:([A-Za-z0-9_-]+)\]/.exec(contentText(m.content));
    if (found) return found[1];
  }
  return null;
}

function toolResultsText(messages) {
  return (messages ?? []).filter((m) => m.role === "tool").map((m) => contentText(m.content)).join("\n---\n");
}

function lastUserText(messages) {
  const users = (messages ?? []).filter((m) => m.role === "user");
  return contentText(users.at(-1)?.content);
}

function streamCompletion(res, model, step) {
  res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
  const id = `chatcmpl-${Math.random().toString(36).slice(2)}`;
  const chunk = (delta, finish = null, extra = {}) =>
    res.write(`data: ${JSON.stringify({ id, object: "chat.completion.chunk", created: 0, model, choices: [{ index: 0, delta, finish_reason: finish }], ...extra })}\n\n`);
  chunk({ role: "assistant", content: "" });
  if (step.text) chunk({ content: step.text });
  (step.toolCalls ?? []).forEach((call, index) => {
    chunk({ tool_calls: [{ index, id: call.id ?? `call_${index}_${Math.random().toString(36).slice(2, 8)}`, type: "function", function: { name: call.name, arguments: "" } }] });
    chunk({ tool_calls: [{ index, function: { arguments: JSON.stringify(call.arguments ?? {}) } }] });
  });
  chunk({}, step.toolCalls?.length ? "tool_calls" : "stop");
  res.write(`data: ${JSON.stringify({ id, object: "chat.completion.chunk", created: 0, model, choices: [], usage: { prompt_tokens: 12, completion_tokens: 5, total_tokens: 17 } })}\n\n`);
  res.end("data: [DONE]\n\n");
}

// A fake OpenAI-compatible provider on loopback: POST /v1/chat/completions with
// SSE streaming, as pi-ai speaks it. Tests script it per scenario: a user
// message containing "[s:<id>]" selects scenario <id>; each request takes the
// scenario's next step (the last repeats): { text } | { toolCalls } |
// { status, error } | { hold: true, … } | { echoToolResults: true }. Control API under /_control.
//
// It streams as OpenAI does: a role chunk, content, each tool call's id and
// name then its arguments, a finish chunk, and `usage` in a final chunk with
// `choices: []` (stream_options.include_usage). A step may also ask for
//   argumentChunk: n   arguments (and text) cut into pieces of n characters, mid-JSON
//   interleave: true   parallel tool calls sent round-robin, chunk by chunk
//   usage: { prompt_tokens, completion_tokens }   the numbers of the final chunk
import { listen, readBody, sendJson } from "./http.mjs";

export const FAKE_PROVIDER_KEY = "fake-provider-key-for-tests";

export async function startModelProvider() {
  /** id → { steps, next, requests, gates: resolvers waiting for release } */
  const scenarios = new Map();
  const unscripted = [];
  const scenario = (id) => {
    if (!scenarios.has(id)) scenarios.set(id, { steps: [], next: 0, requests: [], waiting: [], credits: 0 });
    return scenarios.get(id);
  };

  return listen(async (req, res) => {
    const url = new URL(req.url, "http://x");
    const control = /^\/_control\/scenarios\/([^/]+)(?:\/(requests|release))?$/.exec(url.pathname);
    if (control) {
      const s = scenario(decodeURIComponent(control[1]));
      if (req.method === "PUT" && !control[2]) {
        const { steps } = JSON.parse(await readBody(req));
        Object.assign(s, { steps, next: 0, requests: [], waiting: [], credits: 0 });
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
    const step = s && s.steps.length ? s.steps[Math.min(s.next++, s.steps.length - 1)] : { text: `ok: ${lastUserText(body.messages)}` };
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

/** What OpenAI reports when a step names no usage. */
const DEFAULT_USAGE = { prompt_tokens: 12, completion_tokens: 5 };

/** `text` in pieces of `size` characters (code points: a stream never splits one); whole when no size. */
function pieces(text, size) {
  if (!size) return [text];
  const chars = Array.from(text);
  const out = [];
  for (let i = 0; i < chars.length; i += size) out.push(chars.slice(i, i + size).join(""));
  return out;
}

function streamCompletion(res, model, step) {
  res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
  const id = `chatcmpl-${Math.random().toString(36).slice(2)}`;
  const send = (choices, extra = {}) => res.write(`data: ${JSON.stringify({ id, object: "chat.completion.chunk", created: 0, model, choices, ...extra })}\n\n`);
  const chunk = (delta, finish = null) => send([{ index: 0, delta, finish_reason: finish }]);
  chunk({ role: "assistant", content: "" });
  if (step.text) for (const piece of pieces(step.text, step.argumentChunk)) chunk({ content: piece });
  // Each call: its id and name first, then its arguments, piece by piece.
  const calls = (step.toolCalls ?? []).map((call, index) => [
    { index, id: call.id ?? `call_${index}_${Math.random().toString(36).slice(2, 8)}`, type: "function", function: { name: call.name, arguments: "" } },
    ...pieces(JSON.stringify(call.arguments ?? {}), step.argumentChunk).map((part) => ({ index, function: { arguments: part } })),
  ]);
  const order = step.interleave
    ? Array.from({ length: Math.max(0, ...calls.map((c) => c.length)) }, (_, i) => calls.map((c) => c[i]).filter(Boolean)).flat()
    : calls.flat();
  for (const delta of order) chunk({ tool_calls: [delta] });
  chunk({}, calls.length ? "tool_calls" : "stop");
  const usage = { ...DEFAULT_USAGE, ...step.usage };
  send([], { usage: { ...usage, total_tokens: usage.prompt_tokens + usage.completion_tokens } });
  res.end("data: [DONE]\n\n");
}

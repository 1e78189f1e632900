// The wire protocols the fake model provider speaks, one per pi-ai API: where
// requests arrive, how the key is checked (as the real API checks it), how an
// error looks, and how a scripted reply is streamed. Each stream reports the
// step's usage ({ input, cached, cacheWrite, output }: input excludes cached
// tokens) in the protocol's own fields, and returns the usage object it sent.
import { sendJson } from "./http.mjs";

export const FAKE_PROVIDER_KEY = "fake-provider-key-for-tests";
/** A second valid key, as a tenant that brings its own would have: the provider limits each key on its own. */
export const FAKE_TENANT_KEY = "fake-tenant-key-for-tests";
const KEYS = new Set([FAKE_PROVIDER_KEY, FAKE_TENANT_KEY]);

const DEFAULT_USAGE = { input: 12, cached: 0, cacheWrite: 0, output: 5 };

const rid = (prefix) => `${prefix}${Math.random().toString(36).slice(2, 10)}`;

function sse(res) {
  res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
}

/** Halves of a string: deltas arrive in pieces, as they do from a real stream. */
function halves(text) {
  const mid = Math.ceil(text.length / 2);
  return [text.slice(0, mid), text.slice(mid)].filter((piece) => piece !== "");
}

/** `text` in pieces of `size` characters (code points: a stream never splits one); halves when no size. */
function pieces(text, size) {
  if (!size) return halves(text);
  const chars = Array.from(text);
  const out = [];
  for (let i = 0; i < chars.length; i += size) out.push(chars.slice(i, i + size).join(""));
  return out;
}

function textOf(content) {
  if (typeof content === "string") return content;
  if (Array.isArray(content)) return content.map((c) => c.text ?? (typeof c.content === "string" ? c.content : textOf(c.content)) ?? "").join("");
  return "";
}

/** Both OpenAI APIs: the key as a bearer token, errors as { error: { message, type } }. */
const openAi = {
  keyOf: (req) => (req.headers.authorization ?? "").replace(/^Bearer /, ""),
  authorized: (req) => KEYS.has(openAi.keyOf(req)),
  // Like a careless gateway, it names the key it was given: the runtime must redact it.
  unauthorized: (res, req) => openAi.error(res, 401, `Incorrect API key provided: ${(req.headers.authorization ?? "").replace(/^Bearer /, "")}`),
  // A step's `code` is OpenAI's error code (e.g. "context_length_exceeded"), sent as OpenAI sends it.
  error: (res, status, message, headers, step = {}) =>
    sendJson(
      res,
      status,
      { error: { message, type: status === 401 || step.code ? "invalid_request_error" : "fake_error", param: step.code ? "messages" : null, code: step.code ?? null } },
      headers,
    ),
  // OpenAI says how long in milliseconds (the SDK reads retry-after-ms first).
  rateLimited: (res, waitMs) =>
    openAi.error(res, 429, "Rate limit reached for requests. Please try again later.", { "retry-after-ms": String(waitMs) }, { code: "rate_limit_exceeded" }),
};

/** OpenAI Chat Completions: POST /v1/chat/completions, `data:` chunks, usage in a last chunk without choices. */
const completions = {
  ...openAi,
  api: "openai-completions",
  matches: (path) => path === "/v1/chat/completions",
  lastUserText: (body) => textOf((body.messages ?? []).filter((m) => m.role === "user").at(-1)?.content),
  toolResultsText: (body) => (body.messages ?? []).filter((m) => m.role === "tool").map((m) => textOf(m.content)).join("\n---\n"),
  // `chunkDelayMs`: each piece of text comes that long after the one before, as a model writes;
  // `holdAfter`: after that many pieces, the rest waits for the scenario's release (`held`).
  async stream(res, body, reply, usage) {
    sse(res);
    const id = rid("chatcmpl-");
    const chunk = (delta, finish = null) =>
      res.write(`data: ${JSON.stringify({ id, object: "chat.completion.chunk", created: 0, model: body.model, choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`);
    chunk({ role: "assistant", content: "" });
    for (const [i, piece] of pieces(reply.text ?? "", reply.argumentChunk).entries()) {
      if (i === reply.holdAfter) await reply.held();
      if (reply.chunkDelayMs) await new Promise((resolve) => setTimeout(resolve, reply.chunkDelayMs));
      // The caller went away mid-stream (a courier cut short).
      if (res.destroyed) return {};
      chunk({ content: piece });
    }
    // Each call: its id and name first, then its arguments piece by piece (argumentChunk cuts them mid-JSON);
    // `interleave` sends parallel calls round-robin, chunk by chunk, as OpenAI may.
    const calls = (reply.toolCalls ?? []).map((call, index) => [
      { index, id: call.id ?? rid(`call_${index}_`), type: "function", function: { name: call.name, arguments: "" } },
      ...pieces(JSON.stringify(call.arguments ?? {}), reply.argumentChunk).map((part) => ({ index, function: { arguments: part } })),
    ]);
    const order = reply.interleave
      ? Array.from({ length: Math.max(0, ...calls.map((c) => c.length)) }, (_, i) => calls.map((c) => c[i]).filter(Boolean)).flat()
      : calls.flat();
    for (const delta of order) chunk({ tool_calls: [delta] });
    chunk({}, calls.length ? "tool_calls" : "stop");
    const prompt = usage.input + usage.cached;
    const sent = { prompt_tokens: prompt, completion_tokens: usage.output, total_tokens: prompt + usage.output, prompt_tokens_details: { cached_tokens: usage.cached } };
    res.write(`data: ${JSON.stringify({ id, object: "chat.completion.chunk", created: 0, model: body.model, choices: [], usage: sent })}\n\n`);
    res.end("data: [DONE]\n\n");
    return sent;
  },
};

/** OpenAI Responses: POST /v1/responses, typed events, usage in response.completed. */
const responses = {
  ...openAi,
  api: "openai-responses",
  matches: (path) => path === "/v1/responses",
  lastUserText: (body) => textOf((body.input ?? []).filter((item) => item.role === "user").at(-1)?.content),
  toolResultsText: (body) => (body.input ?? []).filter((item) => item.type === "function_call_output").map((item) => item.output).join("\n---\n"),
  stream(res, body, reply, usage) {
    sse(res);
    let seq = 0;
    const event = (type, data) => res.write(`event: ${type}\ndata: ${JSON.stringify({ type, sequence_number: seq++, ...data })}\n\n`);
    const response = { id: rid("resp_"), object: "response", created_at: 0, model: body.model, status: "in_progress", output: [] };
    event("response.created", { response });
    const output = [];
    if (reply.text) {
      const index = output.length;
      const item = { id: rid("msg_"), type: "message", role: "assistant", status: "in_progress", content: [] };
      event("response.output_item.added", { output_index: index, item });
      event("response.content_part.added", { item_id: item.id, output_index: index, content_index: 0, part: { type: "output_text", text: "", annotations: [] } });
      for (const piece of halves(reply.text)) event("response.output_text.delta", { item_id: item.id, output_index: index, content_index: 0, delta: piece });
      event("response.output_text.done", { item_id: item.id, output_index: index, content_index: 0, text: reply.text });
      const done = { ...item, status: "completed", content: [{ type: "output_text", text: reply.text, annotations: [] }] };
      event("response.output_item.done", { output_index: index, item: done });
      output.push(done);
    }
    for (const call of reply.toolCalls ?? []) {
      const index = output.length;
      const args = JSON.stringify(call.arguments ?? {});
      const item = { id: rid("fc_"), type: "function_call", status: "in_progress", call_id: call.id ?? rid("call_"), name: call.name, arguments: "" };
      event("response.output_item.added", { output_index: index, item });
      for (const piece of halves(args)) event("response.function_call_arguments.delta", { item_id: item.id, output_index: index, delta: piece });
      event("response.function_call_arguments.done", { item_id: item.id, output_index: index, arguments: args });
      const done = { ...item, status: "completed", arguments: args };
      event("response.output_item.done", { output_index: index, item: done });
      output.push(done);
    }
    const prompt = usage.input + usage.cached;
    const sent = {
      input_tokens: prompt,
      input_tokens_details: { cached_tokens: usage.cached },
      output_tokens: usage.output,
      output_tokens_details: { reasoning_tokens: 0 },
      total_tokens: prompt + usage.output,
    };
    event("response.completed", { response: { ...response, status: "completed", output, usage: sent } });
    res.end();
    return sent;
  },
};

const ANTHROPIC_ERROR_TYPES = { 400: "invalid_request_error", 401: "authentication_error", 403: "permission_error", 404: "not_found_error", 429: "rate_limit_error", 529: "overloaded_error" };

/** Anthropic Messages: POST /v1/messages, named SSE events, cache usage in message_start and message_delta. */
const anthropic = {
  api: "anthropic-messages",
  matches: (path) => path === "/v1/messages",
  keyOf: (req) => req.headers["x-api-key"] ?? "",
  authorized: (req) => KEYS.has(anthropic.keyOf(req)) && typeof req.headers["anthropic-version"] === "string",
  unauthorized: (res) => anthropic.error(res, 401, "invalid x-api-key"),
  error: (res, status, message, headers) =>
    sendJson(res, status, { type: "error", error: { type: ANTHROPIC_ERROR_TYPES[status] ?? "api_error", message } }, { "request-id": rid("req_"), ...headers }),
  // Anthropic: whole seconds in retry-after.
  rateLimited: (res, waitMs) =>
    anthropic.error(res, 429, "This request would exceed your organization's rate limit. Please try again later.", { "retry-after": String(Math.ceil(waitMs / 1000)) }),
  lastUserText: (body) => textOf((body.messages ?? []).filter((m) => m.role === "user").at(-1)?.content),
  toolResultsText: (body) =>
    (body.messages ?? [])
      .flatMap((m) => (Array.isArray(m.content) ? m.content : []))
      .filter((block) => block.type === "tool_result")
      .map((block) => textOf(block.content))
      .join("\n---\n"),
  async stream(res, body, reply, usage) {
    sse(res);
    const event = (type, data) => res.write(`event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`);
    const cache = { cache_creation_input_tokens: usage.cacheWrite, cache_read_input_tokens: usage.cached };
    event("message_start", {
      message: { id: rid("msg_"), type: "message", role: "assistant", model: body.model, content: [], stop_reason: null, stop_sequence: null, usage: { input_tokens: usage.input, ...cache, output_tokens: 1 } },
    });
    // `cut`: the connection drops once the answer has begun (the prompt was read, and billed).
    if (reply.cut) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      res.destroy();
      return { input_tokens: usage.input, ...cache, output_tokens: 1 };
    }
    event("ping", {});
    let index = 0;
    if (reply.text) {
      event("content_block_start", { index, content_block: { type: "text", text: "" } });
      for (const piece of halves(reply.text)) event("content_block_delta", { index, delta: { type: "text_delta", text: piece } });
      event("content_block_stop", { index: index++ });
    }
    for (const call of reply.toolCalls ?? []) {
      event("content_block_start", { index, content_block: { type: "tool_use", id: call.id ?? rid("toolu_"), name: call.name, input: {} } });
      for (const piece of halves(JSON.stringify(call.arguments ?? {}))) event("content_block_delta", { index, delta: { type: "input_json_delta", partial_json: piece } });
      event("content_block_stop", { index: index++ });
    }
    const sent = { input_tokens: usage.input, ...cache, output_tokens: usage.output };
    event("message_delta", { delta: { stop_reason: reply.toolCalls?.length ? "tool_use" : "end_turn", stop_sequence: null }, usage: sent });
    event("message_stop", {});
    res.end();
    return sent;
  },
};

const GEMINI_STATUS = { 400: "INVALID_ARGUMENT", 403: "PERMISSION_DENIED", 404: "NOT_FOUND", 429: "RESOURCE_EXHAUSTED", 500: "INTERNAL", 503: "UNAVAILABLE" };

/** Gemini: POST /v1beta/models/{model}:streamGenerateContent?alt=sse, `data:` chunks of candidates, usageMetadata. */
const gemini = {
  api: "google-generative-ai",
  matches: (path, url) => /^\/v1beta\/models\/[^/:]+:streamGenerateContent$/.test(path) && url.searchParams.get("alt") === "sse",
  keyOf: (req, url) => req.headers["x-goog-api-key"] ?? url.searchParams.get("key") ?? "",
  authorized: (req, url) => KEYS.has(gemini.keyOf(req, url)),
  unauthorized: (res) => gemini.error(res, 400, "API key not valid. Please pass a valid API key."),
  // Gemini: no header, a RetryInfo in the error's details.
  rateLimited: (res, waitMs) => gemini.error(res, 429, "Resource has been exhausted (e.g. check quota).", {}, { retryDelay: `${waitMs / 1000}s` }),
  error: (res, status, message, headers, step = {}) =>
    sendJson(
      res,
      status,
      {
        error: {
          code: status,
          message,
          status: GEMINI_STATUS[status] ?? "UNKNOWN",
          ...(step.retryDelay ? { details: [{ "@type": "type.googleapis.com/google.rpc.RetryInfo", retryDelay: step.retryDelay }] } : {}),
        },
      },
      headers,
    ),
  lastUserText: (body) => textOf((body.contents ?? []).filter((c) => c.role === "user").at(-1)?.parts),
  toolResultsText: (body) =>
    (body.contents ?? [])
      .flatMap((c) => c.parts ?? [])
      .filter((part) => part.functionResponse)
      .map((part) => part.functionResponse.response.output ?? part.functionResponse.response.error)
      .join("\n---\n"),
  stream(res, body, reply, usage, url) {
    sse(res);
    const modelVersion = /models\/([^/:]+):/.exec(url.pathname)[1];
    const responseId = rid("");
    const chunk = (parts, extra = {}) => res.write(`data: ${JSON.stringify({ candidates: [{ content: { role: "model", parts }, index: 0, ...extra.candidate }], modelVersion, responseId, ...extra.top })}\r\n\r\n`);
    if (reply.errorInStream) {
      // Gemini may fail an answer it has begun (200) with a bare error object in the body, no `data:`.
      res.end(JSON.stringify({ error: { code: reply.errorInStream, message: "Internal error encountered.", status: GEMINI_STATUS[reply.errorInStream] ?? "UNKNOWN" } }));
      return {};
    }
    for (const piece of halves(reply.text ?? "")) chunk([{ text: piece }]);
    const calls = (reply.toolCalls ?? []).map((call) => ({ functionCall: { name: call.name, args: call.arguments ?? {} } }));
    const prompt = usage.input + usage.cached;
    const sent = { promptTokenCount: prompt, cachedContentTokenCount: usage.cached, candidatesTokenCount: usage.output, totalTokenCount: prompt + usage.output };
    chunk(calls, { candidate: { finishReason: "STOP" }, top: { usageMetadata: sent } });
    res.end();
    return sent;
  },
};

export const PROTOCOLS = [completions, responses, anthropic, gemini];

export function usageOf(step) {
  return { ...DEFAULT_USAGE, ...step.usage };
}

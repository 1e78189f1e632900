// The OpenAI Responses API and the follow of a conversation, against `wrangler
// dev` with the fake model provider and the fake Slack: the official `openai`
// client runs plain, streamed and background responses (polled, cancelled),
// sees a tool call's items and a held call's, calls its own function tool and
// answers it (across a kill too), a reply's text in deltas as the
// provider streams it (with no call into the agent's object per piece), and
// keeps a conversation across calls; then a follower of a Slack conversation is cut off by a kill of the
// dev server mid-turn and resumes with Last-Event-ID, missing nothing.
import assert from "node:assert/strict";
import { exec, execFileSync } from "node:child_process";
import { promisify } from "node:util";
import { rmSync } from "node:fs";
import { createHash, createHmac } from "node:crypto";
import { after, before, test } from "node:test";
import OpenAI from "openai";
import { FAKE_PROVIDER_KEY, startModelProvider } from "../fakes/model-provider.mjs";
import { FAKE_SLACK_BOT_TOKEN, FAKE_SLACK_SIGNING_SECRET, startSlack } from "../fakes/slack.mjs";
import { listen, readBody } from "../fakes/http.mjs";
import { readmeBlocks, startWorker, uncaughtLines, until } from "./wrangler-dev.mjs";
import { follower } from "./follow-stream.mjs";

const ROOT = new URL("../..", import.meta.url).pathname;
const ADMIN = "node-test-responses-admin";
const MODEL = "acme/helper";
const TEAM = "TRESPONSES";

let slack;
let provider;
/** Serves files by URL (pictures, texts) and counts what a gated tool posts to its inbox, on loopback. */
let files;
const posted = [];
let worker;
let client;
const follow = follower(ADMIN);
let vars;
/** A response made before the kill: it is read back after the restart. */
let earlier;

/** A 1×1 PNG, and a picture served by URL (other bytes, so stored apart). */
const PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==";
const SERVED_PNG = Buffer.concat([Buffer.from(PNG, "base64"), Buffer.from("served by URL")]);
const SERVED = {
  "/photo.png": ["image/png", SERVED_PNG],
  "/todo.md": ["application/octet-stream", Buffer.from("- water the plants")],
  "/big.png": ["image/png", Buffer.alloc(1200 * 1024, 1)],
};

before(async () => {
  slack = await startSlack();
  provider = await startModelProvider();
  files = await listen(async (req, res) => {
    if (req.method === "POST") {
      posted.push(await readBody(req));
      return void res.writeHead(200, { "content-type": "text/plain" }).end("Delivered.");
    }
    const [type, body] = SERVED[req.url] ?? [];
    if (!body) return void res.writeHead(404).end();
    res.writeHead(200, { "content-type": type }).end(body);
  });
  vars = {
    ADMIN_TOKEN: ADMIN,
    SLACK_API_BASE_URL: `${slack.url}/api`,
    SLACK_BOT_TOKEN: FAKE_SLACK_BOT_TOKEN,
    SLACK_SIGNING_SECRET: FAKE_SLACK_SIGNING_SECRET,
    MODEL_PROVIDERS: JSON.stringify([{ id: "fake", baseUrl: `${provider.url}/v1`, auth: { secret: "FAKE_PROVIDER_KEY" }, models: { "test-model": {}, "vision-model": { images: true } } }]),
    HARNESS_MODEL: "fake/test-model",
    FAKE_PROVIDER_KEY,
    // A clock every call of which a person must approve, beside the open one.
    // An inbox whose posts wait for approval, as the demo's (docs/approvals.md).
    MOUNTS: JSON.stringify([
      { alias: "clock", plugin: "clock" },
      { alias: "guarded", plugin: "clock", policy: { read: "approval" } },
      { alias: "inbox", plugin: "http", config: { allowedHosts: [new URL(files.url).host] }, policy: { tools: { post: "approval" } } },
    ]),
    // A model call cut off by the kill is sent again soon after the restart.
    EFFECT_LEASE_SECONDS: "2",
    // GET /v1/object-calls: a streamed reply's pieces make no call into the agent's object.
    COUNT_OBJECT_CALLS: "true",
  };
  worker = await startWorker({ cwd: ROOT, vars });
  client = new OpenAI({ apiKey: ADMIN, baseURL: `${worker.url}/v1`, maxRetries: 0 });
});

after(async () => {
  await worker?.stop();
  // The state folder the restart took over (stop removes only one its own start made).
  if (worker) rmSync(worker.persistDir, { recursive: true, force: true });
  await slack?.close();
  await provider?.close();
  await files?.close();
});

const script = (id, steps) => fetch(`${provider.url}/_control/scenarios/${id}`, { method: "PUT", body: JSON.stringify({ steps, by: "position" }) });
const requestsOf = async (id) => (await fetch(`${provider.url}/_control/scenarios/${id}/requests`)).json();
const release = (id) => fetch(`${provider.url}/_control/scenarios/${id}/release`, { method: "POST" });
const api = (path) => fetch(`${worker.url}/v1${path}`, { headers: { authorization: `Bearer ${ADMIN}` } }).then((r) => r.json());

test("responses.create answers with the agent's reply, and previous_response_id and conversation continue one conversation", async () => {
  await script("plain", [{ text: "Hello from the agent." }, { text: "Still the same conversation." }, { text: "Third." }]);
  const first = await client.responses.create({ model: MODEL, input: "[s:plain] hello" });
  assert.equal(first.status, "completed");
  assert.equal(first.output_text, "Hello from the agent.");
  assert.match(first.id, /^resp_/);
  // The turn's model call, as the fake provider reported it.
  assert.deepEqual([first.usage.input_tokens, first.usage.output_tokens, first.usage.total_tokens], [12, 5, 17]);

  const second = await client.responses.create({ model: MODEL, input: [{ role: "user", content: "and again" }], previous_response_id: first.id });
  assert.equal(second.output_text, "Still the same conversation.");
  assert.equal(second.conversation.id, first.conversation.id);
  const third = await client.responses.create({ model: MODEL, input: "once more", conversation: first.conversation.id });
  assert.equal(third.output_text, "Third.");

  // The model was shown the whole conversation each time.
  const last = JSON.stringify((await requestsOf("plain")).at(-1).body);
  for (const said of ["[s:plain] hello", "Hello from the agent.", "and again", "Still the same conversation.", "once more"]) assert.ok(last.includes(said), said);
  const view = await api(`/tenants/acme/agents/helper/conversations/${first.conversation.id}`);
  assert.deepEqual(view.transcript.filter((e) => e.role === "user").map((e) => e.text), ["[s:plain] hello", "and again", "once more"]);
  // Polled later, a response reads as it ended.
  assert.equal((await client.responses.retrieve(first.id)).output_text, "Hello from the agent.");
  earlier = first;
});

test("a tool-calling turn shows its function call and its output; a held call is an approval request saying how to decide it", async () => {
  await script("tool", [{ toolCalls: [{ name: "clock__now", arguments: {} }] }, { text: "It is late." }]);
  const response = await client.responses.create({ model: MODEL, input: "[s:tool] what time is it?" });
  assert.deepEqual(response.output.map((item) => item.type), ["function_call", "function_call_output", "message"]);
  const [call, output] = response.output;
  assert.equal(call.name, "clock__now");
  assert.equal(output.call_id, call.call_id);
  assert.match(output.output, /\d{4}-\d\d-\d\dT/);
  assert.equal(response.output_text, "It is late.");
  assert.deepEqual([response.usage.input_tokens, response.usage.output_tokens], [24, 10], "two model calls");

  await script("held", [{ toolCalls: [{ name: "guarded__now", arguments: {} }] }, { text: "I asked for approval." }]);
  const held = await client.responses.create({ model: MODEL, input: "[s:held] what time is it, carefully?" });
  const request = held.output.find((item) => item.type === "mcp_approval_request");
  assert.ok(request, JSON.stringify(held.output));
  assert.equal(request.server_label, "guarded");
  assert.equal(request.name, "now");
  assert.match(request.held.text, /held for approval until .*approves or denies it: an mcp_approval_response input item .*its card/);
  const pending = (await api(`/tenants/acme/agents/helper/conversations/${held.conversation.id}`)).holds;
  assert.equal(pending[0].holdId, request.id);
});

test("stream: true sends the Responses event sequence: created, the function call's items, text deltas, completed", async () => {
  await script("stream", [{ toolCalls: [{ name: "clock__now", arguments: {} }] }, { text: "Streamed answer." }]);
  const stream = await client.responses.create({ model: MODEL, input: "[s:stream] time, streamed", stream: true });
  const events = [];
  for await (const event of stream) events.push(event);
  const types = events.map((e) => e.type);
  assert.equal(types[0], "response.created");
  assert.equal(types.at(-1), "response.completed");
  assert.deepEqual(events.map((e) => e.sequence_number), events.map((_, i) => i));
  const added = events.filter((e) => e.type === "response.output_item.added").map((e) => e.item.type);
  assert.deepEqual(added, ["function_call", "function_call_output", "message"]);
  assert.equal(events.find((e) => e.type === "response.function_call_arguments.done").arguments, "{}");
  const text = events.filter((e) => e.type === "response.output_text.delta").map((e) => e.delta).join("");
  assert.equal(text, "Streamed answer.");
  assert.equal(events.at(-1).response.output_text, "Streamed answer.");
});

test("stream: true sends a reply the provider streams in 20 pieces as text deltas while it is written; a turn's two messages are two items, a paragraph apart in output_text", async () => {
  // 20 pieces of 5 characters, 80 ms apart: the second call's reply is written over 1.6 s.
  const reply = "The clock answered: it is a quarter past nine and the sun is up, so we may go out and enjoy the day.";
  assert.equal(reply.length, 100);
  await script("pieces", [{ text: "Let me check the clock.", toolCalls: [{ name: "clock__now", arguments: {} }] }, { text: reply, argumentChunk: 5, chunkDelayMs: 80 }]);
  const stream = await client.responses.create({ model: MODEL, input: "[s:pieces] what time is it?", stream: true });
  const events = [];
  for await (const event of stream) events.push({ ...event, heardAt: Date.now() });
  assert.deepEqual(events.map((e) => e.sequence_number), events.map((_, i) => i));
  const completed = events.at(-1);
  assert.equal(completed.type, "response.completed");
  const messages = completed.response.output.filter((item) => item.type === "message");
  assert.deepEqual(messages.map((m) => m.content[0].text), ["Let me check the clock.", `\n\n${reply}`], "two items, the second a paragraph of its own");
  assert.equal(completed.response.output_text, `Let me check the clock.\n\n${reply}`);

  // Each message's deltas, in order, make its text; the streamed one came in many pieces, over the time it was written.
  for (const message of messages) {
    const added = events.find((e) => e.type === "response.output_item.added" && e.item.id === message.id);
    const done = events.find((e) => e.type === "response.output_item.done" && e.item.id === message.id);
    assert.ok(added && done, `the item ${message.id} was opened and closed`);
    assert.equal(done.item.content[0].text, message.content[0].text);
    const deltas = events.filter((e) => e.type === "response.output_text.delta" && e.item_id === message.id);
    assert.ok(deltas.every((e) => e.output_index === added.output_index && e.sequence_number > added.sequence_number && e.sequence_number < done.sequence_number));
    assert.equal(deltas.map((e) => e.delta).join(""), message.content[0].text);
  }
  const pieces = events.filter((e) => e.type === "response.output_text.delta" && e.item_id === messages[1].id);
  assert.ok(pieces.length >= 10, `${pieces.length} deltas for a reply written in 20 pieces`);
  assert.ok(pieces.at(-1).heardAt - pieces[0].heardAt >= 800, "the deltas came while the reply was written, not at its end");

  // OpenAI's client makes output_text from the items: the messages stay apart there too.
  assert.equal((await client.responses.retrieve(completed.response.id)).output_text, `Let me check the clock.\n\n${reply}`);
});

// ---- the caller's own function tools ---------------------------------------------

/** A function tool of the caller's, as OpenAI's documentation declares one. */
const WEATHER = {
  type: "function",
  name: "get_weather",
  description: "The weather in a city now.",
  parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"], additionalProperties: false },
  strict: true,
};
/** A response waiting for its function call's output across the kill below: answered after the restart. */
let pendingCall;
const output = (previous, call, text, tools = [WEATHER], options) =>
  client.responses.create({ model: MODEL, previous_response_id: previous.id, input: [{ type: "function_call_output", call_id: call.call_id, output: text }], tools }, options);

test("a caller's function tool is offered beside the agent's; the model's call of it ends a completed response as a function_call item; its function_call_output carries the turn on to an answer using it, once", async () => {
  await script("fn", [{ text: "Let me look.", toolCalls: [{ name: "get_weather", arguments: { city: "Paris" } }] }, { text: "It is sunny in Paris." }]);
  const first = await client.responses.create({ model: MODEL, input: "[s:fn] the weather in Paris?", tools: [WEATHER] });
  assert.equal(first.status, "completed");
  assert.deepEqual(first.output.map((item) => item.type), ["message", "function_call"]);
  const call = first.output.at(-1);
  assert.deepEqual([call.name, JSON.parse(call.arguments), call.status], ["get_weather", { city: "Paris" }, "completed"]);
  assert.match(call.call_id, /\S/);
  assert.equal(first.output_text, "Let me look.");
  assert.deepEqual(first.tools.map((tool) => [tool.type, tool.name]), [["function", "get_weather"]]);
  // Offered beside the agent's own tools, with its schema as the caller gave it.
  const asked = (await requestsOf("fn"))[0].body;
  const offered = JSON.stringify(asked.tools);
  assert.ok(offered.includes("get_weather") && offered.includes("clock__now"), offered);
  assert.ok(offered.includes("The weather in a city now."), offered);

  // The turn waits: a plain message is refused as OpenAI refuses it, and so is an output for a call that is not there.
  await assert.rejects(client.responses.create({ model: MODEL, previous_response_id: first.id, input: "never mind" }), (err) => {
    assert.equal(err.status, 400);
    assert.equal(err.error.message, `No tool output found for function call ${call.call_id}.`);
    return true;
  });
  await assert.rejects(output(first, { call_id: "call_not_made" }, "{}"), (err) => err.status === 404 && /no function call "call_not_made"/.test(err.error.message));
  assert.equal((await requestsOf("fn")).length, 1, "the model was not asked meanwhile");

  // The output, sent twice with one Idempotency-Key (a client's retry), is one response and one result.
  const key = { headers: { "Idempotency-Key": `fn-${Date.now()}` } };
  const second = await output(first, call, JSON.stringify({ sky: "sunny", celsius: 21 }), [WEATHER], key);
  assert.equal(second.status, "completed");
  assert.equal(second.conversation.id, first.conversation.id);
  assert.equal(second.output_text, "It is sunny in Paris.");
  assert.equal(second.previous_response_id, first.id);
  assert.deepEqual(await output(first, call, JSON.stringify({ sky: "sunny", celsius: 21 }), [WEATHER], key), second);
  const requests = await requestsOf("fn");
  assert.equal(requests.length, 2);
  assert.match(JSON.stringify(requests[1].body), /celsius\\":21/, "the model was given the output");
  // Sent again without the key: the call has its output; nothing is given twice.
  await assert.rejects(output(second, call, "{}"), (err) => {
    assert.equal(err.status, 409);
    assert.match(err.error.message, new RegExp(`function call "${call.call_id}" is not waiting for output: it was given its output already`));
    return true;
  });
  const view = await api(`/tenants/acme/agents/helper/conversations/${first.conversation.id}`);
  assert.deepEqual(view.transcript.filter((e) => e.role === "tool").map((e) => [e.toolCallId, e.text]), [[call.call_id, '{"sky":"sunny","celsius":21}']]);
  assert.equal((await requestsOf("fn")).length, 2, "no model call for the refused output");

  // A call that waits across the kill at the end of this file.
  await script("fnkill", [{ toolCalls: [{ name: "get_weather", arguments: { city: "Oslo" } }] }, { text: "Snow in Oslo." }]);
  pendingCall = await client.responses.create({ model: MODEL, input: "[s:fnkill] the weather in Oslo?", tools: [WEATHER] });
  assert.equal(pendingCall.output.at(-1).type, "function_call");
});

test("a caller's function tool streams as a function_call item (added, arguments delta and done, done) before response.completed", async () => {
  await script("fnstream", [{ toolCalls: [{ name: "get_weather", arguments: { city: "Rome" } }] }, { text: "Warm in Rome." }]);
  const events = [];
  for await (const event of await client.responses.create({ model: MODEL, input: "[s:fnstream] the weather in Rome?", tools: [WEATHER], stream: true })) events.push(event);
  const types = events.map((e) => e.type);
  assert.deepEqual(types.slice(-5), ["response.output_item.added", "response.function_call_arguments.delta", "response.function_call_arguments.done", "response.output_item.done", "response.completed"]);
  const done = events.at(-2).item;
  assert.deepEqual([done.type, done.name, done.arguments, done.status], ["function_call", "get_weather", '{"city":"Rome"}', "completed"]);
  assert.equal(events.at(-1).response.status, "completed");
  assert.deepEqual(events.at(-1).response.output.at(-1), done);

  const answered = [];
  const response = events.at(-1).response;
  for await (const event of await client.responses.create({ model: MODEL, previous_response_id: response.id, input: [{ type: "function_call_output", call_id: done.call_id, output: "warm" }], tools: [WEATHER], stream: true })) answered.push(event);
  assert.equal(answered.at(-1).type, "response.completed");
  assert.equal(answered.at(-1).response.output_text, "Warm in Rome.");
});

test("a turn waiting for its function call's output ends with cancel: the call is closed, an output sent after is a 409, and a message starts the next turn", async () => {
  await script("fncancel", [{ toolCalls: [{ name: "get_weather", arguments: { city: "Lima" } }] }, { text: "Asked again." }]);
  const first = await client.responses.create({ model: MODEL, input: "[s:fncancel] the weather in Lima?", tools: [WEATHER] });
  const call = first.output.at(-1);
  assert.equal(call.type, "function_call");
  await client.responses.cancel(first.id);
  await assert.rejects(output(first, call, "mild"), (err) => err.status === 409 && /its turn ended/.test(err.error.message));
  const next = await client.responses.create({ model: MODEL, previous_response_id: first.id, input: "never mind" });
  assert.equal(next.output_text, "Asked again.");
  assert.match(JSON.stringify((await requestsOf("fncancel")).at(-1).body), /Not performed: the turn was stopped/);
});

test("a function tool named as one of the agent's, or declared wrongly, is a 400 saying so; nothing is written", async () => {
  const clash = { type: "function", name: "clock__now", parameters: { type: "object", properties: {} } };
  await assert.rejects(client.responses.create({ model: MODEL, input: "[s:fnclash] hi", tools: [clash] }), (err) => {
    assert.equal(err.status, 400);
    assert.match(err.error.message, /tools: clock__now is the name of one of the agent's own tools/);
    return true;
  });
  await assert.rejects(client.responses.create({ model: MODEL, input: "hi", tools: [{ type: "function", name: "f", parameters: { type: "string" } }] }), (err) => err.status === 400 && /tools\[0\]: parameters: a JSON schema of type "object"/.test(err.error.message));
  await assert.rejects(client.responses.create({ model: MODEL, input: "hi", tools: [{ type: "function", name: "no spaces" }] }), (err) => err.status === 400 && /tools\[0\]: name: 1 to 64 letters/.test(err.error.message));
  await assert.rejects(client.responses.create({ model: MODEL, input: "hi", tools: [WEATHER, WEATHER] }), (err) => err.status === 400 && /tools\[1\]: a second function named "get_weather"/.test(err.error.message));
  assert.equal((await requestsOf("fnclash")).length, 0, "no turn started");
});

test("a stream: true response's stream, dropped mid-way, is resumed by id from the last sequence number, missing nothing and repeating nothing; asked again whole, it is the same events", async () => {
  const reply = "The clock answered: it is a quarter past nine and the sun is up, so we may go out and enjoy the day.";
  await script("resumed", [{ text: "Let me check the clock.", toolCalls: [{ name: "clock__now", arguments: {} }] }, { text: reply, argumentChunk: 5, chunkDelayMs: 80 }]);
  const stream = await client.responses.create({ model: MODEL, input: "[s:resumed] what time is it?", stream: true });
  // Dropped once three deltas of the streamed reply (the second message) have come: leaving the loop aborts the request.
  const before = [];
  for await (const event of stream) {
    before.push(event);
    const messages = before.filter((e) => e.type === "response.output_item.added" && e.item.type === "message").map((e) => e.item.id);
    if (messages.length === 2 && before.filter((e) => e.type === "response.output_text.delta" && e.item_id === messages[1]).length >= 3) break;
  }
  const id = before[0].response.id;
  assert.equal((await client.responses.retrieve(id)).status, "in_progress", "dropped while the reply was written");
  const after = [];
  for await (const event of await client.responses.retrieve(id, { stream: true, starting_after: before.at(-1).sequence_number })) after.push(event);
  const resumed = [...before, ...after];
  assert.deepEqual(resumed.map((e) => e.sequence_number), resumed.map((_, i) => i), "numbered on from the drop, nothing missed, nothing twice");
  assert.equal(resumed.at(-1).type, "response.completed");
  assert.equal(resumed.filter((e) => e.type === "response.output_text.delta").map((e) => e.delta).join(""), `Let me check the clock.\n\n${reply}`);
  assert.equal(resumed.at(-1).response.output_text, `Let me check the clock.\n\n${reply}`);

  // The whole stream asked again after the end: the same events, numbered the same.
  const again = [];
  for await (const event of await client.responses.retrieve(id, { stream: true })) again.push(event);
  const shape = (e) => [e.sequence_number, e.type, e.output_index, e.item_id ?? e.item?.id, e.delta];
  assert.deepEqual(again.map(shape), resumed.map(shape));
  await assert.rejects(client.responses.retrieve(id, { stream: true, starting_after: "x" }), (err) => err.status === 400 && /starting_after/.test(err.error.message));
});

test("a follower of the conversation hears a reply the provider streams in 20 pieces as text_delta events while it is written, then the whole message", async () => {
  const reply = "The clock answered: it is a quarter past nine and the sun is up, so we may go out and enjoy the day.";
  await script("followed-pieces", [{ text: reply, argumentChunk: 5, chunkDelayMs: 80 }]);
  const started = await client.responses.create({ model: MODEL, input: "[s:followed-pieces] what time is it?", background: true });
  const url = `${worker.url}/v1/tenants/acme/agents/helper/conversations/${encodeURIComponent(started.conversation.id)}/events`;
  const events = [];
  const deltas = [];
  await follow(url, null, events, (seen) => seen.some((e) => e.type === "done"), deltas);
  const message = events.find((e) => e.type === "message" && e.data.entry.role === "assistant");
  assert.equal(message.data.entry.text, reply);
  // The pieces of that call, in order and whole: each starts where the last ended.
  const pieces = deltas.filter((d) => d.calledAt === message.data.entry.calledAt);
  assert.ok(pieces.length >= 10, `${pieces.length} text_delta events for a reply written in 20 pieces`);
  assert.deepEqual(pieces.map((d) => d.at), pieces.map((_, i) => pieces.slice(0, i).reduce((n, d) => n + d.delta.length, 0)));
  assert.equal(pieces.map((d) => d.delta).join(""), reply);
  assert.ok(pieces.at(-1).heardAt - pieces[0].heardAt >= 800, "the pieces came while the reply was written, not at its end");
});

/** Calls into agent objects this dev server has made so far. */
const agentObjectCalls = async () => {
  const { objects } = await api("/object-calls");
  return objects.filter((o) => o.objectClass === "AgentObject").reduce((sum, o) => sum + o.calls, 0);
};

test("a reply streamed in 600 pieces reaches the stream as hundreds of deltas with fewer calls into the agent's object than deltas: none per piece", async () => {
  await script("many", [{ text: "word ".repeat(600).trim(), argumentChunk: 5, chunkDelayMs: 4 }]);
  const before = await agentObjectCalls();
  const stream = await client.responses.create({ model: MODEL, input: "[s:many] talk a lot", stream: true });
  const events = [];
  for await (const event of stream) events.push(event);
  const calls = (await agentObjectCalls()) - before;
  const deltas = events.filter((e) => e.type === "response.output_text.delta");
  assert.equal(deltas.map((e) => e.delta).join(""), events.at(-1).response.output_text);
  // The turn's own calls (the message, the claim, the report) and the feed's looks, 25-500 ms apart: a call per piece would be ≥ one per delta.
  assert.ok(deltas.length >= 50, `${deltas.length} deltas`);
  assert.ok(calls < deltas.length / 2, `${calls} calls into the agent's object for ${deltas.length} deltas`);
});

test("background: true answers at once; the response is polled to its end, or cancelled while its turn runs", async () => {
  await script("bg", [{ hold: true, text: "Done in the background." }]);
  const started = await client.responses.create({ model: MODEL, input: "[s:bg] take your time", background: true });
  assert.equal(started.status, "in_progress");
  assert.equal(started.background, true);
  await until("the model to be asked", async () => (await requestsOf("bg")).length === 1);
  assert.equal((await client.responses.retrieve(started.id)).status, "in_progress");
  await release("bg");
  const done = await until("the background response to complete", async () => {
    const r = await client.responses.retrieve(started.id);
    return r.status === "completed" && r;
  });
  assert.equal(done.output_text, "Done in the background.");

  await script("cancel", [{ hold: true, text: "never shown" }]);
  const running = await client.responses.create({ model: MODEL, input: "[s:cancel] a long job", background: true });
  await until("the model to be asked", async () => (await requestsOf("cancel")).length === 1);
  const cancelled = await client.responses.cancel(running.id);
  assert.equal(cancelled.status, "cancelled");
  await release("cancel");
  assert.equal((await client.responses.retrieve(running.id)).status, "cancelled");
  const view = await api(`/tenants/acme/agents/helper/conversations/${running.conversation.id}`);
  assert.ok(!view.transcript.some((e) => e.role === "assistant"), "the stopped turn's late reply was not kept");
});

test("a response to a conversation whose turn runs steers that turn, and ends with it, whatever the agent's second-message strategy", async () => {
  // An agent that queues a second message behind the turn: a response's message still steers.
  const put = await fetch(`${worker.url}/v1/tenants/acme/agents/steerer/second-message`, {
    method: "PUT",
    headers: { authorization: `Bearer ${ADMIN}`, "content-type": "application/json" },
    body: JSON.stringify({ strategy: "queue" }),
  });
  assert.equal(put.status, 200);
  await script("steer", [{ hold: true, text: "First part." }, { text: "With your addition." }]);
  const running = await client.responses.create({ model: "acme/steerer", input: "[s:steer] start something", background: true });
  await until("the model to be asked", async () => (await requestsOf("steer")).length === 1);
  const steering = await client.responses.create({ model: "acme/steerer", input: "also this", previous_response_id: running.id, background: true });
  assert.equal(steering.conversation.id, running.conversation.id);
  await release("steer");
  const [first, second] = await until("both to complete", async () => {
    const both = await Promise.all([running.id, steering.id].map((id) => client.responses.retrieve(id)));
    return both.every((r) => r.status === "completed") && both;
  });
  const texts = (r) => r.output.filter((item) => item.type === "message").map((item) => item.content[0].text);
  // A message after another in one response starts a paragraph of its own (output_text does not glue them).
  assert.deepEqual(texts(first), ["First part.", "\n\nWith your addition."]);
  assert.equal(first.output_text, "First part.\n\nWith your addition.");
  assert.equal(texts(second).at(-1), "\n\nWith your addition.");
  assert.ok(JSON.stringify((await requestsOf("steer")).at(-1).body).includes("also this"), "the model saw the steer");
});

// ---- pictures and files in the input ---------------------------------------------

const asAdmin = (method, path, body) =>
  fetch(`${worker.url}/v1${path}`, { method, headers: { authorization: `Bearer ${ADMIN}`, "content-type": "application/json" }, body: body && JSON.stringify(body) });
/** How many times `part` is in `text`. */
const count = (text, part) => text.split(part).length - 1;

test("input_image and input_file reach the model as a chat's files do: a picture (data: URL or by URL) as image input, once; a text file as text; a retry with the same Idempotency-Key is the same response", async () => {
  assert.equal((await asAdmin("PUT", "/tenants/acme/agents/seer/model", { model: "fake/vision-model" })).status, 200);
  await script("pictures", [{ text: "A dot, a photo, and your notes." }]);
  const input = [
    {
      role: "user",
      content: [
        { type: "input_text", text: "[s:pictures] look at these" },
        { type: "input_image", image_url: `data:image/png;base64,${PNG}` },
        { type: "input_image", image_url: `${files.url}/photo.png` },
        { type: "input_file", filename: "notes.txt", file_data: Buffer.from("the answer is 42").toString("base64") },
        { type: "input_file", file_url: `${files.url}/todo.md` },
      ],
    },
  ];
  const idempotencyKey = `pictures-${Date.now()}`;
  const first = await client.responses.create({ model: "acme/seer", input }, { headers: { "Idempotency-Key": idempotencyKey } });
  assert.equal(first.status, "completed");
  assert.equal(first.output_text, "A dot, a photo, and your notes.");
  const stored = storedImages("acme", "seer");
  const again = await client.responses.create({ model: "acme/seer", input }, { headers: { "Idempotency-Key": idempotencyKey } });
  assert.equal(again.id, first.id, "the retry is the same response");
  assert.deepEqual(again.output, first.output);

  const requests = await requestsOf("pictures");
  assert.equal(requests.length, 1, "one message, one model call");
  const body = JSON.stringify(requests[0].body);
  assert.equal(count(body, PNG), 1, "the inline picture's bytes, once");
  assert.equal(count(body, SERVED_PNG.toString("base64")), 1, "the fetched picture's bytes, once");
  assert.ok(body.includes("the answer is 42") && body.includes("- water the plants"), "both text files as text");
  const view = await api(`/tenants/acme/agents/seer/conversations/${first.conversation.id}`);
  assert.equal(view.transcript.filter((e) => e.role === "user").length, 1, "the retry wrote no second message");
  // In R2 under the agent, named by their sha256 (what the model was sent was read back from there), and not put again by the retry.
  const sha = (bytes) => createHash("sha256").update(bytes).digest("hex");
  assert.deepEqual(Object.keys(stored).sort(), [Buffer.from(PNG, "base64"), SERVED_PNG].map((bytes) => `images/acme/seer/${sha(bytes)}`).sort());
  assert.deepEqual(storedImages("acme", "seer"), stored, "the retry stored nothing again");
});

/**
 * An agent's pictures in the dev server's R2, each key with the blob its last
 * put wrote (a put writes a new one), read from its state on disk
 * (read-only; Node 20 has no SQLite module, so python3 reads it, as
 * bench/counters.mjs does).
 */
function storedImages(tenant, agent) {
  const reader = `
import glob, json, os, sqlite3, sys
found = {}
for f in glob.glob(os.path.join(sys.argv[1], "v3", "r2", "miniflare-R2BucketObject", "*.sqlite")):
    if f.endswith("metadata.sqlite"): continue
    db = sqlite3.connect("file:" + f + "?mode=ro", uri=True, timeout=10)
    found.update(db.execute("SELECT key, blob_id FROM _mf_objects WHERE key LIKE ?", (sys.argv[2] + "%",)).fetchall())
    db.close()
print(json.dumps(found))`;
  return JSON.parse(execFileSync("python3", ["-c", reader, worker.persistDir, `images/${tenant}/${agent}/`]).toString());
}

test("a picture to a model that does not take images reaches it as a notice saying so", async () => {
  await script("blind", [{ text: "I cannot see it." }]);
  const response = await client.responses.create({ model: MODEL, input: [{ role: "user", content: [{ type: "input_text", text: "[s:blind] what is this?" }, { type: "input_image", image_url: `data:image/png;base64,${PNG}` }] }] });
  assert.equal(response.output_text, "I cannot see it.");
  const body = JSON.stringify((await requestsOf("blind"))[0].body);
  assert.equal(count(body, PNG), 0);
  assert.match(body, /image not shown: this model cannot see images/);
});

test("a file past its cap, of a kind not read, by file_id or from a link that is not https is a 400 naming why (the cap too); a body past the limit is a 413 naming it; nothing is written", async () => {
  const refused = async (content, status, says) => {
    await assert.rejects(client.responses.create({ model: MODEL, input: [{ role: "user", content: [{ type: "input_text", text: "look" }, content] }], conversation: "refused-files" }), (err) => {
      assert.equal(err.status, status, err.message);
      assert.equal(err.error.type, "invalid_request_error");
      assert.match(err.error.message, says);
      return true;
    });
  };
  const big = (bytes) => Buffer.alloc(bytes, 7).toString("base64");
  await refused({ type: "input_image", image_url: `data:image/png;base64,${big(1100 * 1024)}` }, 400, /input\[0\]\.content\[1\] \(image\): 1126400 bytes, larger than the 1024 KiB the agent reads of an image/);
  await refused({ type: "input_file", filename: "long.txt", file_data: big(300 * 1024) }, 400, /larger than the 256 KiB the agent reads of a text file/);
  await refused({ type: "input_image", image_url: `${files.url}/big.png` }, 400, /big\.png\): .*could not be fetched \(larger than 1024 KiB\)/);
  await refused({ type: "input_image", image_url: `${files.url}/missing.png` }, 400, /could not be fetched \(HTTP 404\)/);
  await refused({ type: "input_file", file_data: `data:application/pdf;base64,${big(10)}` }, 400, /application\/pdf: the agent reads text .* or a picture/);
  await refused({ type: "input_image", file_id: "file-abc" }, 400, /input_image's file_id is not supported/);
  await refused({ type: "input_image", image_url: "http://example.com/dot.png" }, 400, /image_url: an https URL \(http only on loopback\) or a data: URL/);
  await refused({ type: "input_image", image_url: `data:image/png;base64,${big(1000 * 1024)}x` }, 400, /not base64/);
  // Two pictures of 560 KiB: each within its cap, together past what one message brings (and within the body's limit).
  const two = Array.from({ length: 2 }, () => ({ type: "input_image", image_url: `data:image/png;base64,${big(560 * 1024)}` }));
  await assert.rejects(client.responses.create({ model: MODEL, input: [{ role: "user", content: [{ type: "input_text", text: "look" }, ...two] }], conversation: "refused-files" }), (err) => {
    assert.equal(err.status, 400);
    assert.match(err.error.message, /more than the 1500000 the agent reads of one message/);
    return true;
  });
  await refused({ type: "input_image", image_url: `data:image/png;base64,${big(1200 * 1024)}` }, 413, /the limit is 1565536/);
  assert.equal((await asAdmin("GET", "/tenants/acme/agents/helper/conversations/refused-files")).status, 404, "nothing was written");
});

// ---- answering held calls with mcp_approval_response --------------------------------

/** A turn that asks to post `body` to the inbox (held), then says so; the next turn reports the outcome. */
async function heldPost(scenario, body, via = client) {
  await script(scenario, [{ toolCalls: [{ name: "inbox__post", arguments: { url: `${files.url}/inbox`, body } }] }, { text: "I asked for approval." }, { text: "Reported the outcome." }]);
  const held = await via.responses.create({ model: MODEL, input: `[s:${scenario}] please post ${body}` });
  const request = held.output.find((item) => item.type === "mcp_approval_request");
  assert.ok(request, JSON.stringify(held.output));
  assert.equal(request.server_label, "inbox");
  assert.equal(request.name, "post");
  return { held, request };
}
const answer = (via, previous, request, approve, reason) =>
  via.responses.create({ model: MODEL, previous_response_id: previous.id, input: [{ type: "mcp_approval_response", approval_request_id: request.id, approve, ...(reason ? { reason } : {}) }] });

test("an mcp_approval_response approving a held call performs it once and the response waits for the turn that carries it on; sent again, it is a 409 saying it was decided, and nothing is performed again", async () => {
  const before = posted.length;
  const { held, request } = await heldPost("approve", "approved hello");
  assert.equal(posted.length, before, "nothing posted while it is held");

  const approved = await answer(client, held, request, true);
  assert.equal(approved.status, "completed");
  assert.equal(approved.conversation.id, held.conversation.id);
  assert.equal(approved.output_text, "Reported the outcome.");
  const call = approved.output.find((item) => item.type === "mcp_call");
  assert.ok(call, JSON.stringify(approved.output));
  assert.deepEqual([call.approval_request_id, call.status, call.server_label, call.name], [request.id, "completed", "inbox", "post"]);
  assert.match(call.output, /Delivered/);
  assert.deepEqual(posted.slice(before), ["approved hello"], "performed once");
  assert.match(JSON.stringify((await requestsOf("approve")).at(-1).body), /was approved by admin\. Performed: /, "the model was told the outcome");

  await assert.rejects(answer(client, approved, request, true), (err) => {
    assert.equal(err.status, 409);
    assert.equal(err.error.type, "invalid_request_error");
    assert.match(err.error.message, new RegExp(`approval request "${request.id}": Already decided: performed by admin`));
    return true;
  });
  await new Promise((resolve) => setTimeout(resolve, 500));
  assert.deepEqual(posted.slice(before), ["approved hello"], "not performed again");
  assert.equal((await requestsOf("approve")).length, 3, "no turn started for the second answer");
});

test("an mcp_approval_response denying a held call tells the model, with its reason; nothing is performed", async () => {
  const before = posted.length;
  const { held, request } = await heldPost("deny", "denied hello");
  const denied = await answer(client, held, request, false, "not on a Friday");
  assert.equal(denied.status, "completed");
  assert.equal(denied.output_text, "Reported the outcome.");
  assert.match(JSON.stringify((await requestsOf("deny")).at(-1).body), /was denied by admin \(not on a Friday\)\. It was not performed\./);
  const card = (await api(`/tenants/acme/agents/helper/conversations/${held.conversation.id}`)).holds.find((h) => h.holdId === request.id);
  assert.equal(card.state, "denied");
  assert.equal(posted.length, before, "nothing posted");
});

test("an mcp_approval_response decides as the caller's key: another key, neither who asked nor an approver, is a 403 and the call still waits; the key that asked decides it, in the audit trail by that key", async () => {
  const key = async (name) => (await (await asAdmin("POST", "/tenants/acme/keys", { name })).json()).key;
  const asker = new OpenAI({ apiKey: await key("asker"), baseURL: `${worker.url}/v1`, maxRetries: 0 });
  const stranger = new OpenAI({ apiKey: await key("stranger"), baseURL: `${worker.url}/v1`, maxRetries: 0 });
  const before = posted.length;
  const { held, request } = await heldPost("keys", "asked by a key", asker);
  await assert.rejects(answer(stranger, held, request, true), (err) => {
    assert.equal(err.status, 403);
    assert.match(err.error.message, /You are not allowed to decide this approval\. It is still waiting\./);
    return true;
  });
  assert.equal((await api(`/tenants/acme/agents/helper/conversations/${held.conversation.id}`)).holds[0].state, "pending");
  await assert.rejects(asker.responses.create({ model: MODEL, input: [{ type: "mcp_approval_response", approval_request_id: "h0000000000000000", approve: true }], previous_response_id: held.id }), (err) => err.status === 404 && /no approval request "h0000000000000000"/.test(err.error.message));
  await assert.rejects(asker.responses.create({ model: MODEL, input: [{ type: "mcp_approval_response", approval_request_id: request.id, approve: true }] }), (err) => err.status === 400 && /give previous_response_id/.test(err.error.message));

  const approved = await answer(asker, held, request, true);
  assert.equal(approved.output_text, "Reported the outcome.");
  assert.deepEqual(posted.slice(before), ["asked by a key"]);
  const keyId = (await (await asAdmin("GET", "/tenants/acme/keys")).json()).keys.find((k) => k.name === "asker").id;
  const row = await until("the decision in the audit trail", async () => (await api("/tenants/acme/audit?limit=50")).entries?.find((r) => r.action === "hold.approve" && r.subject.endsWith(request.id)));
  assert.equal(row.actor, `key:${keyId}`);
});

test("docs/openai.md's curl of the Responses API answers as it says", async () => {
  const [curl] = readmeBlocks("Try it", "docs/openai.md").filter((block) => block.includes("/v1/responses"));
  const command = curl.replaceAll("127.0.0.1:8787", `127.0.0.1:${worker.port}`).replaceAll("dev-admin-token", ADMIN);
  // Not execSync: the fake model provider lives in this process and must answer meanwhile.
  const response = JSON.parse((await promisify(exec)(command, { shell: "/bin/bash" })).stdout);
  assert.equal(response.status, "completed");
  assert.equal(response.model, "demo/helper");
  assert.equal(response.output_text, "ok: What time is it?");
});

test("errors come in OpenAI's shape", async () => {
  await assert.rejects(client.responses.create({ model: "no-slash", input: "hi" }), (err) => {
    assert.equal(err.status, 400);
    assert.equal(err.error.type, "invalid_request_error");
    assert.match(err.error.message, /model: "<tenant>\/<agent>"/);
    return true;
  });
  await assert.rejects(client.responses.retrieve(`resp_${Buffer.from("acme/helper").toString("base64url")}_${"0".repeat(32)}`), (err) => err.status === 404 && err.error.type === "not_found_error");
  await assert.rejects(client.responses.create({ model: MODEL, input: [{ role: "system", content: "obey" }] }), (err) => err.status === 400 && /role: user/.test(err.error.message));
  await assert.rejects(client.responses.create({ model: MODEL, input: [{ role: "user", content: [{ type: "input_text", text: " " }] }] }), (err) => err.status === 400 && /input has no words, picture, file, mcp_approval_response or function_call_output/.test(err.error.message));
  await assert.rejects(client.responses.create({ model: MODEL, input: [{ type: "function_call", call_id: "c1", name: "f", arguments: "{}" }] }), (err) => err.status === 400 && /an input item is a message \(role: user\), an mcp_approval_response or a function_call_output/.test(err.error.message));
  await assert.rejects(client.responses.create({ model: MODEL, input: [{ type: "function_call_output", call_id: "c1", output: "{}" }] }), (err) => err.status === 400 && /function_call_output answers .* give previous_response_id/.test(err.error.message));
  const stranger = new OpenAI({ apiKey: "not-the-key", baseURL: `${worker.url}/v1`, maxRetries: 0 });
  await assert.rejects(stranger.responses.create({ model: MODEL, input: "hi" }), (err) => err.status === 401 && err.error.type === "authentication_error");
});

// ---- a client that goes away mid-turn ----------------------------------------------

/** What workerd reported as uncaught since `from` (its output's length then), but for its own line for a client gone (uncaughtLines). */
const uncaughtSince = (from) => uncaughtLines(worker.output().slice(from));

/** Opens `res`'s event stream, reads until `seen` matches what came, then goes away (the connection is dropped). */
async function readThenDrop(res, controller, seen) {
  assert.equal(res.status, 200);
  const decoder = new TextDecoder();
  let text = "";
  for await (const chunk of res.body) {
    text += decoder.decode(chunk, { stream: true });
    if (seen.test(text)) break;
  }
  controller.abort();
  return text;
}

test("a client that goes away mid-turn (a stream: true response, a follow of the conversation) leaves the turn to finish, and nothing of ours is uncaught", async () => {
  const from = worker.output().length;
  const headers = { authorization: `Bearer ${ADMIN}`, "content-type": "application/json" };
  await script("dropped", [{ hold: true, text: "Finished without its reader." }, { hold: true, text: "Finished without its follower." }]);
  const streamed = new AbortController();
  const opened = await fetch(`${worker.url}/v1/responses`, { method: "POST", headers, signal: streamed.signal, body: JSON.stringify({ model: MODEL, input: "[s:dropped] take your time", stream: true }) });
  const head = await readThenDrop(opened, streamed, /"type":"response\.in_progress"/);
  const id = /"id":"(resp_[^"]+)"/.exec(head)[1];
  await until("the model to be asked", async () => (await requestsOf("dropped")).length === 1);
  await release("dropped");
  const done = await until("the dropped response to complete", async () => {
    const r = await client.responses.retrieve(id);
    return r.status !== "in_progress" && r;
  });
  assert.equal(done.status, "completed");
  assert.equal(done.output_text, "Finished without its reader.");

  // A follower of the conversation that goes away while its next turn runs.
  const next = await client.responses.create({ model: MODEL, input: "and again", previous_response_id: id, background: true });
  const followed = new AbortController();
  const feed = await fetch(`${worker.url}/v1/tenants/acme/agents/helper/conversations/${done.conversation.id}/events`, { headers, signal: followed.signal });
  await readThenDrop(feed, followed, /event: message[\s\S]*and again/);
  await until("the model to be asked again", async () => (await requestsOf("dropped")).length === 2);
  await release("dropped");
  const after = await until("the followed turn to complete", async () => {
    const r = await client.responses.retrieve(next.id);
    return r.status !== "in_progress" && r;
  });
  assert.equal(after.output_text, "Finished without its follower.");
  // Whatever was still to be written to them was written after they left; workerd has had time to say so.
  await new Promise((resolve) => setTimeout(resolve, 1000));
  assert.deepEqual(uncaughtSince(from), []);
});

// ---- following a Slack conversation across a kill ---------------------------------

function signed(body) {
  const timestamp = String(Math.floor(Date.now() / 1000));
  const signature = `v0=${createHmac("sha256", FAKE_SLACK_SIGNING_SECRET).update(`v0:${timestamp}:${body}`).digest("hex")}`;
  return { method: "POST", headers: { "content-type": "application/json", "x-slack-request-timestamp": timestamp, "x-slack-signature": signature }, body };
}


test("a follower of a Slack conversation sees each event once and in order, and after a kill of the dev server resumes with Last-Event-ID missing nothing", async () => {
  const channel = `CFOLLOW${Date.now()}`;
  const ts = `${Math.floor(Date.now() / 1000)}.000100`;
  await script("follow", [{ toolCalls: [{ name: "clock__now", arguments: {} }] }, { hold: true, text: "The clock answered." }]);
  const mention = {
    type: "event_callback",
    team_id: TEAM,
    api_app_id: "ARESPONSES",
    event_id: `Ev${channel}`,
    event_time: Math.floor(Date.now() / 1000),
    authorizations: [{ team_id: TEAM, user_id: "UFAKEBOT", is_bot: true, is_enterprise_install: false }],
    event: { type: "app_mention", user: "UPERSON", text: "<@UFAKEBOT> [s:follow] what time is it?", ts, channel, channel_type: "channel" },
  };
  assert.equal((await fetch(`${worker.url}/slack/events`, signed(JSON.stringify(mention)))).status, 200);
  const conversation = `${TEAM}:${channel}:${ts}`;
  const path = `/tenants/${TEAM}/agents/assistant/conversations/${encodeURIComponent(conversation)}/events`;
  await until("the conversation", async () => (await fetch(`${worker.url}/v1${path}?after=999999999`, { headers: { authorization: `Bearer ${ADMIN}` } }).then((r) => (r.body?.cancel(), r.status))) === 200);

  // Before the kill: the turn starts, the clock is called and answered, and the model's second call is held by the fake.
  const before = [];
  const firstRun = follow(`${worker.url}/v1${path}`, null, before, () => false);
  await until("the model's second call", async () => (await requestsOf("follow")).length === 2 && before.some((e) => e.type === "tool_result"));
  assert.ok(!before.some((e) => e.type === "done"), "the turn is still running at the kill");
  await worker.kill();
  assert.equal(await firstRun, "broken");

  worker = await startWorker({ cwd: ROOT, vars, persistDir: worker.persistDir, port: worker.port });
  // The responses live in the agent's object: one made before the kill reads the same after it.
  if (earlier) assert.deepEqual(await client.responses.retrieve(earlier.id), earlier);
  // A function call that waited across the kill is given its output once, and the turn answers with it.
  if (pendingCall) {
    const call = pendingCall.output.at(-1);
    const answered = await output(pendingCall, call, "snowing");
    assert.equal(answered.output_text, "Snow in Oslo.");
    assert.match(JSON.stringify((await requestsOf("fnkill")).at(-1).body), /snowing/);
    await assert.rejects(output(pendingCall, call, "snowing"), (err) => err.status === 409);
    assert.equal((await requestsOf("fnkill")).length, 2);
  }
  // The cut-off call is answered only for its redelivery: the first release frees the dead one.
  await release("follow");
  await release("follow");
  const afterKill = [];
  const resumed = await follow(`${worker.url}/v1${path}`, String(before.at(-1).id), afterKill, (events) => events.some((e) => e.type === "done"));
  assert.equal(resumed, "enough");

  const seen = [...before, ...afterKill];
  const ids = seen.map((e) => e.id);
  assert.deepEqual(ids, [...new Set(ids)].sort((a, b) => a - b), "each event once, in order");
  assert.deepEqual(
    seen.map((e) => e.type),
    ["status", "message", "message", "tool_result", "message", "done"],
  );
  assert.equal(seen.at(-2).data.entry.text, "The clock answered.");
  // Missing nothing: a follower from the start now reads exactly what the two connections saw.
  const whole = [];
  await follow(`${worker.url}/v1${path}`, null, whole, (events) => events.some((e) => e.type === "done"));
  assert.deepEqual(whole.map((e) => [e.id, e.type]), seen.map((e) => [e.id, e.type]));
});

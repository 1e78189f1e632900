// The peer of the bench's `peer` section: a minimal Vercel Chat SDK bot
// (`chat` + `@chat-adapter/slack`, in-memory state) that answers an
// app_mention by calling the model and posting the reply in the thread. It
// talks to the same loopback fakes as the runtime: the Slack adapter's
// `apiUrl` points its WebClient at the fake Slack, and the model is called
// through pi-ai's OpenAI Chat Completions entry (the client and protocol the
// runtime's couriers use) at the fake provider. Not durable: a crash loses
// what it was doing, which is the point of comparing.
// Started as its own Node process (as workerd is); prints its URL and pid when ready.
// Usage: node bench/chat-sdk-app.mjs <signing secret> <bot token> <Slack API URL> <provider base URL> <provider key>
import { createServer } from "node:http";
import { createSlackAdapter } from "@chat-adapter/slack";
import { createMemoryState } from "@chat-adapter/state-memory";
import { streamOpenAICompletions } from "@mariozechner/pi-ai/openai-completions";
import { Chat } from "chat";

const [signingSecret, botToken, apiUrl, baseUrl, apiKey] = process.argv.slice(2);
if (!apiKey) throw new Error("usage: node bench/chat-sdk-app.mjs <signing secret> <bot token> <Slack API URL> <provider base URL> <provider key>");

/** The model as pi-ai describes one: the fake provider behind its Chat Completions API. */
const model = {
  id: "test-model",
  name: "test-model",
  api: "openai-completions",
  provider: "fake",
  baseUrl,
  reasoning: false,
  input: ["text"],
  cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 },
  contextWindow: 128_000,
  maxTokens: 4096,
};

const bot = new Chat({
  userName: "bench",
  logger: "error",
  state: createMemoryState(),
  // botUserId given: the adapter knows its own mention without an auth.test call, as bench/bolt-app.mjs does.
  adapters: { slack: createSlackAdapter({ signingSecret, botToken, botUserId: "UBENCHBOT", apiUrl }) },
});

bot.onNewMention(async (thread, message) => {
  const reply = await streamOpenAICompletions(
    model,
    { systemPrompt: "You are a helpful assistant in Slack.", messages: [{ role: "user", content: message.text, timestamp: Date.now() }] },
    { apiKey, maxRetries: 0, signal: AbortSignal.timeout(120_000) },
  ).result();
  if (reply.stopReason === "error" || reply.stopReason === "aborted") throw new Error(`model call failed: ${reply.errorMessage}`);
  await thread.post(reply.content.filter((c) => c.type === "text").map((c) => c.text).join(""));
});

/** Node's request as the Web Request the Chat SDK's webhook takes; its Response written back. */
const server = createServer(async (req, res) => {
  const chunks = [];
  for await (const chunk of req) chunks.push(chunk);
  const request = new Request(`http://127.0.0.1${req.url}`, { method: req.method, headers: req.headers, body: req.method === "POST" ? Buffer.concat(chunks) : undefined });
  // The handler runs after the ack, as on a platform's waitUntil; its errors are logged by the SDK.
  const response = await bot.webhooks.slack(request, { waitUntil: (task) => void task.catch(() => {}) });
  res.writeHead(response.status, Object.fromEntries(response.headers));
  res.end(Buffer.from(await response.arrayBuffer()));
});
server.listen(0, "127.0.0.1", () => console.log(`ready http://127.0.0.1:${server.address().port} pid ${process.pid}`));

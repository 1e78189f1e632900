// The peer of the bench's `peer` and `discord` sections: a minimal Vercel Chat
// SDK bot (`chat` + `@chat-adapter/slack` or `@chat-adapter/discord`,
// in-memory state) that answers a mention by calling the model and posting the
// reply in the thread. It talks to the same loopback fakes as the runtime: the
// adapter's `apiUrl` points it at the fake Slack or the fake Discord, and the
// model is called through pi-ai's OpenAI Chat Completions entry (the client
// and protocol the runtime's couriers use) at the fake provider. Not durable: a
// crash loses what it was doing, which is the point of comparing.
// Started as its own Node process (as workerd is); prints its URL and pid when ready.
// Usage: node bench/chat-sdk-app.mjs <provider base URL> <provider key> slack <signing secret> <bot token> <Slack API URL>
//        node bench/chat-sdk-app.mjs <provider base URL> <provider key> discord <public key> <bot token> <application id> <Discord API URL>
import { createServer } from "node:http";
import { createMemoryState } from "@chat-adapter/state-memory";
import { streamOpenAICompletions } from "@mariozechner/pi-ai/openai-completions";
import { Chat, ConsoleLogger } from "chat";

const [baseUrl, apiKey, platform, ...settings] = process.argv.slice(2);
/** Each platform's adapter, loaded only when asked for (the Slack peer's process never loads discord.js). */
const ADAPTERS = {
  slack: async ([signingSecret, botToken, apiUrl]) => {
    const { createSlackAdapter } = await import("@chat-adapter/slack");
    // botUserId given: the adapter knows its own mention without an auth.test call, as bench/bolt-app.mjs does.
    return createSlackAdapter({ signingSecret, botToken, botUserId: "UBENCHBOT", apiUrl });
  },
  discord: async ([publicKey, botToken, applicationId, apiUrl]) => {
    const { createDiscordAdapter } = await import("@chat-adapter/discord");
    // Its own logger says "info" for every forwarded event unless told otherwise.
    return createDiscordAdapter({ publicKey, botToken, applicationId, apiUrl, logger: new ConsoleLogger("error") });
  },
};
const SETTINGS = { slack: 3, discord: 4 };
if (!ADAPTERS[platform] || settings.length !== SETTINGS[platform]) throw new Error("usage: see the head of bench/chat-sdk-app.mjs");

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
  adapters: { [platform]: await ADAPTERS[platform](settings) },
});

bot.onNewMention(async (thread, message) => {
  const reply = await streamOpenAICompletions(
    model,
    { systemPrompt: `You are a helpful assistant in ${platform === "slack" ? "Slack" : "Discord"}.`, messages: [{ role: "user", content: message.text, timestamp: Date.now() }] },
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
  // Slack's handler runs after the ack, as on a platform's waitUntil; its errors are logged by the SDK.
  // A Discord message forwarded from the gateway is answered once its handler is done (the adapter awaits it).
  const response = await bot.webhooks[platform](request, { waitUntil: (task) => void task.catch(() => {}) });
  res.writeHead(response.status, Object.fromEntries(response.headers));
  res.end(Buffer.from(await response.arrayBuffer()));
});
server.listen(0, "127.0.0.1", () => console.log(`ready http://127.0.0.1:${server.address().port} pid ${process.pid}`));

// The ack baseline of `npm run bench`: a minimal @slack/bolt app on loopback,
// HTTPReceiver with signature verification on, a handler that does nothing.
// Started as its own process (as workerd is), it prints its URL when ready.
// Usage: node bench/bolt-app.mjs <signing secret>
import bolt from "@slack/bolt";

const { App, HTTPReceiver } = bolt;
const signingSecret = process.argv[2];
if (!signingSecret) throw new Error("usage: node bench/bolt-app.mjs <signing secret>");

const receiver = new HTTPReceiver({ signingSecret, endpoints: "/slack/events" });
// authorize answers from memory (no auth.test call: no network), as an app with one workspace's token does once it knows its bot.
const app = new App({ receiver, authorize: async () => ({ botToken: "xoxb-bench-bolt", botUserId: "UBENCHBOT", botId: "BBENCH" }) });
app.event("app_mention", async () => {});
app.event("message", async () => {});

const server = await app.start({ port: 0, host: "127.0.0.1" });
const address = (server ?? receiver.server)?.address?.();
console.log(`ready http://127.0.0.1:${address.port}`);

// The discord.js connector's forwarding, in Node, against the running Worker
// (`wrangler dev` on a free loopback port) and the fake Discord REST server. The
// messages are discord.js Message objects built here from recorded payloads.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { after, before, test } from "node:test";
import { ChannelType, Client, GatewayIntentBits, Message } from "discord.js";
import { forward, gatewayPayload, shouldForward } from "../../bridges/discord/gateway.mjs";
import { DISCORD_APPLICATION_ID, DISCORD_BOT_TOKEN, startDiscord } from "../fakes/discord.mjs";
import { startWorker, until } from "./wrangler-dev.mjs";

const ROOT = new URL("../..", import.meta.url).pathname;
const SECRET = "node-test-gateway-secret";
const recorded = JSON.parse(readFileSync(new URL("../fixtures/discord/discord.json", import.meta.url), "utf8"));
const BOT = DISCORD_APPLICATION_ID;

let discord;
let worker;
let workerUrl;

before(async () => {
  discord = await startDiscord();
  worker = await startWorker({
    cwd: ROOT,
    vars: {
      DISCORD_GATEWAY_SECRET: SECRET,
      DISCORD_API_BASE_URL: `${discord.url}/api/v10`,
      DISCORD_BOT_TOKEN,
      DISCORD_APPLICATION_ID,
      ADMIN_TOKEN: "node-test-admin-token",
      HARNESS_MODEL: "",
      MODEL_PROVIDERS: "[]",
    },
  });
  workerUrl = worker.url;
});

after(async () => {
  await worker?.stop();
  await discord?.close();
});

const client = new Client({ intents: [GatewayIntentBits.Guilds, GatewayIntentBits.GuildMessages, GatewayIntentBits.MessageContent] });
const guild = client.guilds._add({ id: recorded.metadata.guildId, name: "test guild", channels: [], roles: [], members: [] });
let nextId = 1_600_000_000_000_000_000n;
const snowflake = () => String(nextId++);

function message(data) {
  return new Message(client, { ...recorded.gatewayMention.data, id: snowflake(), ...data });
}

async function channelCalls(channel) {
  return (await fetch(`${discord.url}/_control/calls?channel=${channel}`)).json();
}

/** The channel's messages once the turn's status was edited to its final state. */
function answered(channel) {
  return until(`the answer in channel ${channel}`, async () => {
    const calls = await channelCalls(channel);
    return calls.some((c) => c.method === "PATCH" && c.body.content.includes("Done.")) ? calls : undefined;
  });
}

const posted = (calls) => calls.filter((c) => c.method === "POST" && c.status === 200).map((c) => c.body.content);

test("a message's attachments are forwarded as Discord's message object has them", () => {
  const file = { id: snowflake(), filename: "photo.png", size: 68, url: "https://cdn.discordapp.com/attachments/1/2/photo.png?ex=1&is=2&hm=3", proxy_url: "https://media.discordapp.net/attachments/1/2/photo.png", content_type: "image/png" };
  const payload = gatewayPayload(message({ channel_id: snowflake(), attachments: [file] }));
  assert.deepEqual(payload.attachments, [{ filename: "photo.png", size: 68, url: file.url, content_type: "image/png" }]);
});

test("a mention is forwarded and answered in the channel once, even when forwarded twice", async () => {
  const channel = snowflake();
  const msg = message({ channel_id: channel, content: `<@${BOT}> hello from node` });
  assert.equal(shouldForward(msg, BOT), true);
  const target = { url: workerUrl, secret: SECRET };
  const first = await forward(msg, target);
  assert.equal(first.status, 202);
  const second = await forward(msg, target);
  assert.equal(second.status, 200);
  assert.equal((await second.json()).accepted, false);

  const replies = posted(await answered(channel));
  assert.equal(replies.length, 2);
  assert.equal(replies[0], "⏳ Working on it…");
  assert.match(replies[1], /^You said: "hello from node"/);
});

test("a bot's message is never forwarded, and the Worker ignores one that is", async () => {
  const channel = snowflake();
  const msg = new Message(client, { ...recorded.gatewayBotWelcome.data, id: snowflake(), channel_id: channel });
  assert.equal(msg.author.bot, true);
  assert.equal(shouldForward(msg, BOT), false);
  const res = await forward(msg, { url: workerUrl, secret: SECRET });
  assert.deepEqual(await res.json(), { ignored: "the author is a bot" });
  const conversation = await fetch(`${workerUrl}/v1/tenants/${msg.guildId}/agents/assistant/conversations/${channel}`, {
    headers: { authorization: "Bearer node-test-admin-token" },
  });
  assert.equal(conversation.status, 404);
});

test("in the bot's own thread no mention is needed; elsewhere it is", () => {
  const thread = client.channels._add(
    { id: snowflake(), type: ChannelType.PublicThread, guild_id: guild.id, owner_id: BOT, parent_id: recorded.metadata.channelId, name: "t" },
    guild,
  );
  const inThread = message({ channel_id: thread.id, content: "Hey", mentions: [] });
  assert.equal(shouldForward(inThread, BOT), true);
  const elsewhere = message({ channel_id: snowflake(), content: "Hey", mentions: [] });
  assert.equal(shouldForward(elsewhere, BOT), false);
});

test("a wrong secret is refused by the Worker", async () => {
  const res = await forward(message({ channel_id: snowflake(), content: `<@${BOT}> hi` }), { url: workerUrl, secret: "wrong" });
  assert.equal(res.status, 401);
});

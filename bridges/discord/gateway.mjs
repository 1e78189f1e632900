// `npm run discord:gateway`: the Discord gateway connector. Channel messages reach
// an app only over the gateway, so this Node process holds the connection
// (discord.js) and forwards the messages the agent should see to the Worker's
// POST /discord/gateway-events, signed with DISCORD_GATEWAY_SECRET. The Worker
// answers through the REST API; this process never posts.
//
// Settings (environment, else .dev.vars; `--help`): DISCORD_BOT_TOKEN,
// DISCORD_GATEWAY_SECRET, ANTIPROTON_URL (default http://127.0.0.1:8787).
import { pathToFileURL } from "node:url";
import { Client, Events, GatewayIntentBits, Partials } from "discord.js";
import { z } from "zod";
import { ConnectorError, networkReason, postSigned, readSettings, runConnector, WORKER_URL } from "../shared/connector.mjs";

const MAX_ATTEMPTS = 5;
const COMMAND = "npm run discord:gateway";

export const SETTINGS = {
  command: COMMAND,
  summary: "holds the Discord gateway connection and forwards the messages the agent should see to the Worker's POST /discord/gateway-events.",
  doc: "docs/discord.md (5. Run the gateway connector)",
  settings: {
    DISCORD_BOT_TOKEN: { help: "the bot's token (Developer Portal → Bot → Reset Token)", schema: z.string() },
    DISCORD_GATEWAY_SECRET: { help: "signs each forward; the Worker has the same value", schema: z.string() },
    ANTIPROTON_URL: WORKER_URL,
  },
};

/** A person mentioning the bot, writing in a thread the bot started, or DMing it. Never a bot or a webhook. */
export function shouldForward(message, botUserId) {
  if (message.author.bot || message.webhookId || message.system) return false;
  if (!message.guildId) return true;
  if (message.mentions.users.has(botUserId)) return true;
  const channel = message.channel;
  return Boolean(channel?.isThread() && channel.ownerId === botUserId);
}

/** The fields of Discord's own message object (as MESSAGE_CREATE carries it) that the Worker reads. */
export function gatewayPayload(message) {
  return {
    id: message.id,
    channel_id: message.channelId,
    guild_id: message.guildId,
    content: message.content,
    webhook_id: message.webhookId,
    author: { id: message.author.id, username: message.author.username, global_name: message.author.globalName, bot: message.author.bot },
    attachments: [...message.attachments.values()].map((file) => ({ filename: file.name, size: file.size, url: file.url, content_type: file.contentType })),
  };
}

/**
 * POSTs one message to the Worker, retrying while the Worker is unreachable or
 * answers 5xx. The message id is the event id there, so a retry is never a second turn.
 */
export function forward(message, target) {
  return postSigned(target, "/discord/gateway-events", JSON.stringify(gatewayPayload(message)), MAX_ATTEMPTS);
}

async function main() {
  const settings = readSettings(SETTINGS);
  const target = { url: settings.ANTIPROTON_URL, secret: settings.DISCORD_GATEWAY_SECRET };
  const client = new Client({
    intents: [GatewayIntentBits.Guilds, GatewayIntentBits.GuildMessages, GatewayIntentBits.MessageContent, GatewayIntentBits.DirectMessages],
    partials: [Partials.Channel], // DMs arrive on channels discord.js has not cached
  });
  client.once(Events.ClientReady, (ready) => console.log(`connected as ${ready.user.tag}; forwarding to ${target.url}`));
  client.on(Events.MessageCreate, async (message) => {
    if (!shouldForward(message, client.user.id)) return;
    try {
      const res = await forward(message, target);
      if (!res.ok) console.error(`message ${message.id}: the Worker answered ${res.status} ${await res.text()}`);
    } catch (err) {
      console.error(`message ${message.id}: could not reach ${target.url} (${networkReason(err)})`);
    }
  });
  for (const signal of ["SIGINT", "SIGTERM"]) process.on(signal, () => client.destroy().finally(() => process.exit(0)));
  try {
    await client.login(settings.DISCORD_BOT_TOKEN);
  } catch (err) {
    await client.destroy();
    throw new ConnectorError(
      err?.code === "TokenInvalid" // discord.js's name for Discord's 401
        ? "Discord refused DISCORD_BOT_TOKEN: copy the bot's token again (Developer Portal → Bot → Reset Token)."
        : `Could not connect to Discord's gateway (${networkReason(err)}). Check the network, then run ${COMMAND} again.`,
    );
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) await runConnector(COMMAND, main);

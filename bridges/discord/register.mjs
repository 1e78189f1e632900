// `npm run discord:register`: registers the slash commands /ask, /stop, /compact
// and /status. With DISCORD_GUILD_ID they are registered for that guild (instant);
// without, globally (bulk overwrite of the app's global commands).
//
// Settings (environment, else .dev.vars; `--help`): DISCORD_APPLICATION_ID,
// DISCORD_BOT_TOKEN, optional DISCORD_GUILD_ID and DISCORD_API_BASE_URL.
import { z } from "zod";
import { ConnectorError, networkReason, readSettings, runConnector } from "../shared/connector.mjs";

const STRING_OPTION = 3;
const CHAT_INPUT = 1;
const COMMAND = "npm run discord:register";

const COMMANDS = [
  {
    name: "ask",
    type: CHAT_INPUT,
    description: "Ask the agent",
    options: [{ name: "text", description: "What to ask", type: STRING_OPTION, required: true }],
  },
  { name: "stop", type: CHAT_INPUT, description: "Stop the agent's running turn in this channel" },
  { name: "compact", type: CHAT_INPUT, description: "Summarise this channel's conversation to free the agent's context" },
  { name: "status", type: CHAT_INPUT, description: "Show what the agent is doing in this channel" },
];

const snowflake = z.string().regex(/^\d{17,20}$/, "must be a Discord id (17 to 20 digits)");

const SETTINGS = {
  command: COMMAND,
  summary: "registers the slash commands /ask, /stop, /compact and /status for the Discord application.",
  doc: "docs/discord.md (4. Register the commands)",
  settings: {
    DISCORD_APPLICATION_ID: { help: "the application id (Developer Portal → General Information)", schema: snowflake },
    DISCORD_BOT_TOKEN: { help: "the bot's token (Developer Portal → Bot → Reset Token)", schema: z.string() },
    DISCORD_GUILD_ID: { help: "register in this server only (appears at once); unset: globally", schema: snowflake.optional() },
    DISCORD_API_BASE_URL: {
      help: "the REST API (default https://discord.com/api/v10)",
      schema: z.url({ protocol: /^https?$/, error: "must be an http(s) URL" }).default("https://discord.com/api/v10"),
    },
  },
};

async function main() {
  const settings = readSettings(SETTINGS);
  const { DISCORD_APPLICATION_ID: app, DISCORD_GUILD_ID: guild } = settings;
  const base = settings.DISCORD_API_BASE_URL.replace(/\/+$/, "");
  const path = guild ? `/applications/${app}/guilds/${guild}/commands` : `/applications/${app}/commands`;
  let res;
  try {
    res = await fetch(`${base}${path}`, {
      method: "PUT",
      headers: {
        authorization: `Bot ${settings.DISCORD_BOT_TOKEN}`,
        "content-type": "application/json",
        "user-agent": "DiscordBot (https://github.com/antiproton, 0.1.0)",
      },
      body: JSON.stringify(COMMANDS),
    });
  } catch (err) {
    throw new ConnectorError(`Could not reach Discord at ${base} (${networkReason(err)}). Check the network, then run ${COMMAND} again.`);
  }
  if (!res.ok) throw new ConnectorError(`Discord answered ${res.status}: ${await res.text()}`);
  const registered = await res.json();
  console.log(`registered ${registered.map((c) => `/${c.name}`).join(", ")} ${guild ? `in guild ${guild}` : "globally"}`);
}

await runConnector(COMMAND, main);

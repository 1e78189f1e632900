// `npm run discord:register`: registers the slash commands /ask, /stop, /compact
// and /status. With DISCORD_GUILD_ID they are registered for that guild (instant);
// without, globally (bulk overwrite of the app's global commands).
//
// Environment: DISCORD_APPLICATION_ID, DISCORD_BOT_TOKEN, optional DISCORD_GUILD_ID
// and DISCORD_API_BASE_URL (default https://discord.com/api/v10).
const STRING_OPTION = 3;
const CHAT_INPUT = 1;

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

const env = (name) => {
  const value = process.env[name];
  if (!value) {
    console.error(`${name} is not set (see docs/discord.md)`);
    process.exit(1);
  }
  return value;
};

const app = env("DISCORD_APPLICATION_ID");
const token = env("DISCORD_BOT_TOKEN");
const guild = process.env.DISCORD_GUILD_ID;
const base = (process.env.DISCORD_API_BASE_URL ?? "https://discord.com/api/v10").replace(/\/+$/, "");
const path = guild ? `/applications/${app}/guilds/${guild}/commands` : `/applications/${app}/commands`;

const res = await fetch(`${base}${path}`, {
  method: "PUT",
  headers: { authorization: `Bot ${token}`, "content-type": "application/json", "user-agent": "DiscordBot (https://github.com/antiproton, 0.1.0)" },
  body: JSON.stringify(COMMANDS),
});
if (!res.ok) {
  console.error(`Discord answered ${res.status}: ${await res.text()}`);
  process.exit(1);
}
const registered = await res.json();
console.log(`registered ${registered.map((c) => `/${c.name}`).join(", ")} ${guild ? `in guild ${guild}` : "globally"}`);

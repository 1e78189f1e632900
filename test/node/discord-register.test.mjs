// `npm run discord:register` against the fake Discord REST server.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { after, before, test } from "node:test";
import { DISCORD_APPLICATION_ID, DISCORD_BOT_TOKEN, startDiscord } from "../fakes/discord.mjs";

const run = promisify(execFile);
const SCRIPT = new URL("../../bridges/discord/register.mjs", import.meta.url).pathname;
let discord;

before(async () => {
  discord = await startDiscord();
});
after(() => discord.close());

function register(env) {
  return run(process.execPath, [SCRIPT], {
    env: { PATH: process.env.PATH, DISCORD_API_BASE_URL: `${discord.url}/api/v10`, DISCORD_APPLICATION_ID, ...env },
  });
}

test("registers /ask (with its text option), /stop, /compact and /status for a guild", async () => {
  const { stdout } = await register({ DISCORD_BOT_TOKEN, DISCORD_GUILD_ID: "1457468924290662599" });
  assert.match(stdout, /registered \/ask, \/stop, \/compact, \/status in guild 1457468924290662599/);
  const [call] = await (await fetch(`${discord.url}/_control/calls?kind=commands`)).json();
  assert.equal(call.path, `/api/v10/applications/${DISCORD_APPLICATION_ID}/guilds/1457468924290662599/commands`);
  assert.deepEqual(call.body.map((c) => c.name), ["ask", "stop", "compact", "status"]);
  assert.deepEqual(call.body[0].options, [{ name: "text", description: "What to ask", type: 3, required: true }]);
});

test("a rejected token fails with Discord's answer", async () => {
  await assert.rejects(register({ DISCORD_BOT_TOKEN: "wrong" }), (err) => err.code === 1 && /Discord answered 401/.test(err.stderr));
});

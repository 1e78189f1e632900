// The Node connectors as a newcomer starts them: settings from .dev.vars alone
// (no environment but PATH), every missing variable named in one message,
// --help, a Slack token of the wrong kind refused with a sentence saying which
// is which, and no network ending in one sentence and exit code 1.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { after, before, test } from "node:test";
import { DISCORD_APPLICATION_ID, DISCORD_BOT_TOKEN, startDiscord } from "../fakes/discord.mjs";
import { OFFLINE_ENV } from "./wrangler-dev.mjs";

const run = promisify(execFile);
const script = (path) => new URL(`../../bridges/${path}`, import.meta.url).pathname;
const CONNECTORS = {
  "slack:socket": { path: script("slack/socket-mode.mjs"), needs: ["SLACK_APP_TOKEN", "SLACK_SOCKET_FORWARD_SECRET"] },
  "discord:gateway": { path: script("discord/gateway.mjs"), needs: ["DISCORD_BOT_TOKEN", "DISCORD_GATEWAY_SECRET"] },
  "discord:register": { path: script("discord/register.mjs"), needs: ["DISCORD_APPLICATION_ID", "DISCORD_BOT_TOKEN"] },
  "telegram:register": { path: script("telegram/register.mjs"), needs: ["TELEGRAM_BOTS", "TELEGRAM_WEBHOOK_SECRET", "ANTIPROTON_URL"] },
};
/** "A and B", "A, B and C": as the connectors list what they need. */
const listed = (names) => (names.length > 1 ? `${names.slice(0, -1).join(", ")} and ${names.at(-1)}` : names[0]);
const dirs = [];
let discord;

before(async () => {
  discord = await startDiscord();
});
after(async () => {
  await discord.close();
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

/** Runs a connector in a folder holding `devVars` as its .dev.vars, with only PATH (and `env`) in its environment. */
async function start(name, devVars, { env = {}, args = [] } = {}) {
  const cwd = mkdtempSync(join(tmpdir(), "antiproton-connector-"));
  dirs.push(cwd);
  writeFileSync(join(cwd, ".dev.vars"), devVars);
  try {
    const { stdout, stderr } = await run(process.execPath, [CONNECTORS[name].path, ...args], { cwd, env: { PATH: process.env.PATH, ...env }, timeout: 60_000 });
    return { code: 0, stdout, stderr };
  } catch (err) {
    if (err.code === undefined || typeof err.code !== "number") throw err;
    return { code: err.code, stdout: err.stdout, stderr: err.stderr };
  }
}

const EXAMPLE_ONLY = "# as .dev.vars.example makes it\nADMIN_TOKEN=dev-admin-token\n";
const noStackTrace = (output) => assert.doesNotMatch(output, /^\s+at \S/m, `a stack trace:\n${output}`);

for (const [name, { needs }] of Object.entries(CONNECTORS)) {
  test(`${name} with a .dev.vars that has none of its variables names them all in one message`, async () => {
    const { code, stderr } = await start(name, EXAMPLE_ONLY);
    assert.equal(code, 1);
    const [first] = stderr.split("\n");
    assert.equal(first, `npm run ${name} needs ${listed(needs)}: set them in .dev.vars or the environment.`);
    noStackTrace(stderr);
  });

  test(`${name} --help lists its variables and exits 0`, async () => {
    const { code, stdout } = await start(name, "", { args: ["--help"] });
    assert.equal(code, 0);
    for (const variable of needs) assert.match(stdout, new RegExp(`^  ${variable} +required `, "m"));
    assert.match(stdout, /from \.dev\.vars/);
  });
}

test("a variable found in .dev.vars is not asked for; one from the environment wins over .dev.vars", async () => {
  const socket = await start("slack:socket", "SLACK_SOCKET_FORWARD_SECRET='from the file'\n");
  assert.match(socket.stderr, /^npm run slack:socket needs SLACK_APP_TOKEN: set it in \.dev\.vars or the environment\.$/m);

  const devVars = [`DISCORD_APPLICATION_ID=${DISCORD_APPLICATION_ID}`, `DISCORD_BOT_TOKEN="${DISCORD_BOT_TOKEN}"`, `DISCORD_API_BASE_URL=${discord.url}/api/v10`, "DISCORD_GUILD_ID=1457468924290662599 # a test guild"].join("\n");
  const registered = await start("discord:register", devVars);
  assert.equal(registered.code, 0, registered.stderr);
  assert.match(registered.stdout, /registered \/ask, \/stop, \/compact, \/status in guild 1457468924290662599/);
  const overridden = await start("discord:register", devVars, { env: { DISCORD_BOT_TOKEN: "not-the-token" } });
  assert.equal(overridden.code, 1);
  assert.match(overridden.stderr, /^Discord answered 401/);
});

test("slack:socket refuses a bot token where the app-level token belongs, and the other way round, saying which is which", async () => {
  const swapped = "SLACK_APP_TOKEN=xoxb-1-2-3\nSLACK_BOT_TOKEN=xapp-1-A2-3-4\nSLACK_SOCKET_FORWARD_SECRET=s\n";
  const { code, stderr } = await start("slack:socket", swapped);
  assert.equal(code, 1);
  assert.match(stderr, /^SLACK_APP_TOKEN holds a bot token \(xoxb-…\)\. Socket Mode needs the app-level token, xapp-… .*; a bot token goes in SLACK_BOT_TOKEN\.$/m);
  assert.match(stderr, /^SLACK_BOT_TOKEN holds an app-level token \(xapp-…\)\. The Worker posts with the bot token, xoxb-… .*; an app-level token goes in SLACK_APP_TOKEN\.$/m);
});

const OFFLINE = {
  "slack:socket": ["SLACK_APP_TOKEN=xapp-1-A1-2-abc", "SLACK_SOCKET_FORWARD_SECRET=s"],
  "discord:gateway": ["DISCORD_BOT_TOKEN=MTA.not.real", "DISCORD_GATEWAY_SECRET=s"],
  "discord:register": [`DISCORD_APPLICATION_ID=${DISCORD_APPLICATION_ID}`, "DISCORD_BOT_TOKEN=MTA.not.real"],
  "telegram:register": ['TELEGRAM_BOTS={"mybot":{"token":"123:AAnotreal","username":"my_agent_bot"}}', "TELEGRAM_WEBHOOK_SECRET=a-long-enough-secret", "ANTIPROTON_URL=https://agents.example.com"],
};
const GAVE_UP = {
  "slack:socket": /^Could not open a Socket Mode connection to Slack after 6 attempts \(getaddrinfo ENOTFOUND slack\.com\)\. Check the network, then run npm run slack:socket again\.$/,
  "discord:gateway": /^Could not connect to Discord's gateway \(getaddrinfo ENOTFOUND discord\.com\)\. Check the network, then run npm run discord:gateway again\.$/,
  "discord:register": /^Could not reach Discord at https:\/\/discord\.com\/api\/v10 \(getaddrinfo ENOTFOUND discord\.com\)\. Check the network, then run npm run discord:register again\.$/,
  "telegram:register": /^Could not reach Telegram at https:\/\/api\.telegram\.org \(getaddrinfo ENOTFOUND api\.telegram\.org\)\. Check the network, then run npm run telegram:register again\.$/,
};

for (const [name, lines] of Object.entries(OFFLINE)) {
  test(`${name} with no network ends with one sentence and exit code 1`, async () => {
    const { code, stdout, stderr } = await start(name, lines.join("\n"), { env: OFFLINE_ENV });
    assert.equal(code, 1);
    const output = `${stdout}${stderr}`.trim();
    assert.match(output.split("\n").at(-1), GAVE_UP[name]);
    noStackTrace(output);
  });
}

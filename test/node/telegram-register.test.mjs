// `npm run telegram:register` against the fake Bot API: each bot's webhook is
// set with the secret token the Worker checks, and its commands registered.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { createHmac } from "node:crypto";
import { promisify } from "node:util";
import { after, before, test } from "node:test";
import { startTelegram, TELEGRAM_BOTS } from "../fakes/telegram.mjs";

const run = promisify(execFile);
const SCRIPT = new URL("../../bridges/telegram/register.mjs", import.meta.url).pathname;
const SECRET = "a-webhook-secret-for-the-test";
let telegram;

before(async () => {
  telegram = await startTelegram();
});
after(() => telegram.close());

function register(env) {
  return run(process.execPath, [SCRIPT], {
    cwd: new URL(".", import.meta.url).pathname,
    env: { PATH: process.env.PATH, TELEGRAM_API_BASE_URL: telegram.url, TELEGRAM_WEBHOOK_SECRET: SECRET, ANTIPROTON_URL: "https://agents.example.com", ...env },
  });
}

test("sets each bot's webhook with its derived secret token, then /stop, /compact and /status", async () => {
  const { stdout } = await register({ TELEGRAM_BOTS: JSON.stringify(TELEGRAM_BOTS) });
  assert.match(stdout, /@vercelchatsdkbot \(tenant tgbot\): webhook https:\/\/agents\.example\.com\/telegram\/tgbot\/webhook, commands \/stop, \/compact, \/status/);
  const calls = await (await fetch(`${telegram.url}/_control/calls`)).json();
  assert.deepEqual(calls.map((c) => [c.bot, c.method, c.status]), [
    ["vercelchatsdkbot", "setWebhook", 200],
    ["vercelchatsdkbot", "setMyCommands", 200],
    ["second_test_bot", "setWebhook", 200],
    ["second_test_bot", "setMyCommands", 200],
  ]);
  assert.deepEqual(calls[0].params, {
    url: "https://agents.example.com/telegram/tgbot/webhook",
    secret_token: createHmac("sha256", SECRET).update("telegram-webhook:tgbot").digest("hex"),
    allowed_updates: ["message", "callback_query"],
  });
  assert.deepEqual(calls[1].params.commands.map((c) => c.command), ["stop", "compact", "status"]);
});

test("a token Telegram does not know fails with its answer; a plain-http Worker URL is refused before any call", async () => {
  const wrong = JSON.stringify({ x: { token: "123:AAwrongwrongwrongwrongwrongwrong", username: "x_bot" } });
  await assert.rejects(register({ TELEGRAM_BOTS: wrong }), (err) => err.code === 1 && /Telegram answered setWebhook with 401: Unauthorized/.test(err.stderr));
  await assert.rejects(register({ TELEGRAM_BOTS: wrong, ANTIPROTON_URL: "http://agents.example.com" }), (err) => err.code === 1 && /ANTIPROTON_URL must be an https URL/.test(err.stderr));
});

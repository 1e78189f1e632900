// `npm run telegram:register`: points each bot of TELEGRAM_BOTS at the Worker
// (setWebhook with its secret_token, the HMAC of its tenant under
// TELEGRAM_WEBHOOK_SECRET, as bridges/telegram/config.ts checks it) and
// registers its commands /stop, /compact and /status (setMyCommands), so
// Telegram offers them in the chat's menu.
//
// Settings (environment, else .dev.vars; `--help`): TELEGRAM_BOTS,
// TELEGRAM_WEBHOOK_SECRET, ANTIPROTON_URL (the Worker's public https URL),
// optional TELEGRAM_API_BASE_URL.
import { createHmac } from "node:crypto";
import { z } from "zod";
import { ConnectorError, networkReason, readSettings, runConnector } from "../shared/connector.mjs";

const COMMAND = "npm run telegram:register";

const COMMANDS = [
  { command: "stop", description: "Stop the agent's running turn in this chat" },
  { command: "compact", description: "Summarise this chat's conversation to free the agent's context" },
  { command: "status", description: "Show what the agent is doing in this chat" },
];

/** What the bridge acts on; Telegram sends nothing else to the webhook. */
const ALLOWED_UPDATES = ["message", "callback_query"];

const bots = z
  .string()
  .transform((text, ctx) => {
    try {
      return JSON.parse(text);
    } catch {
      ctx.addIssue({ code: "custom", message: "is not JSON" });
      return z.NEVER;
    }
  })
  .pipe(z.record(z.string().min(1), z.object({ token: z.string().regex(/^\d+:[A-Za-z0-9_-]+$/, "a bot token"), username: z.string() }), { error: 'must be {"<tenant>": {"token": "<bot token>", "username": "<bot username>"}}' }));

const SETTINGS = {
  command: COMMAND,
  summary: "sets each Telegram bot's webhook (with its secret token) and its commands /stop, /compact and /status.",
  doc: "docs/telegram.md (3. Point the bots at the Worker)",
  settings: {
    TELEGRAM_BOTS: { help: 'the bots, as the Worker reads them: {"<tenant>": {"token": "<from BotFather>", "username": "<bot username>"}}', schema: bots },
    TELEGRAM_WEBHOOK_SECRET: { help: "the secret each bot's webhook secret token is derived from (the Worker's own)", schema: z.string().min(16, "must be at least 16 characters") },
    ANTIPROTON_URL: { help: "the Worker's public URL, https (Telegram calls it)", schema: z.url({ protocol: /^https$/, error: "must be an https URL (Telegram sends webhooks to https only)" }) },
    TELEGRAM_API_BASE_URL: {
      help: "the Bot API (default https://api.telegram.org)",
      schema: z.url({ protocol: /^https?$/, error: "must be an http(s) URL" }).default("https://api.telegram.org"),
    },
  },
};

async function call(base, token, method, params) {
  let res;
  try {
    res = await fetch(`${base}/bot${token}/${method}`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(params) });
  } catch (err) {
    throw new ConnectorError(`Could not reach Telegram at ${base} (${networkReason(err)}). Check the network, then run ${COMMAND} again.`);
  }
  const answer = await res.json().catch(() => ({}));
  if (!answer.ok) throw new ConnectorError(`Telegram answered ${method} with ${answer.error_code ?? res.status}: ${answer.description ?? res.statusText}`);
}

async function main() {
  const settings = readSettings(SETTINGS);
  const base = settings.TELEGRAM_API_BASE_URL.replace(/\/+$/, "");
  const worker = settings.ANTIPROTON_URL.replace(/\/+$/, "");
  for (const [tenant, bot] of Object.entries(settings.TELEGRAM_BOTS)) {
    const url = `${worker}/telegram/${encodeURIComponent(tenant)}/webhook`;
    const secret_token = createHmac("sha256", settings.TELEGRAM_WEBHOOK_SECRET).update(`telegram-webhook:${tenant}`).digest("hex");
    await call(base, bot.token, "setWebhook", { url, secret_token, allowed_updates: ALLOWED_UPDATES });
    await call(base, bot.token, "setMyCommands", { commands: COMMANDS });
    console.log(`@${bot.username} (tenant ${tenant}): webhook ${url}, commands ${COMMANDS.map((c) => `/${c.command}`).join(", ")}`);
  }
}

await runConnector(COMMAND, main);

// The Telegram bridge's settings, parsed here: the bots it serves (each bot is
// a tenant with its own token), the secret every bot's webhook secret_token is
// derived from, the Bot API's base URL and the agent. Secrets are read by name
// (they are not part of the generated Env type).
import * as z from "zod";
import { baseUrlFrom, ConfigError, parseJsonVar, secretNamed } from "../../lib/config.ts";
import { hmacHex } from "../../lib/http.ts";

const DEFAULT_API_BASE_URL = "https://api.telegram.org";
const DEFAULT_AGENT = "assistant";

/** A bot token as BotFather gives it: the bot's numeric id, a colon, the secret part. */
const botToken = z.string().regex(/^\d{1,20}:[A-Za-z0-9_-]{20,100}$/, "a bot token as BotFather gives it (<bot id>:<secret>)");

const botsSchema = z.record(
  z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/, "a tenant name (letters, digits, . _ -)"),
  z.object({
    token: botToken,
    /** Without the @: a group message is addressed to the bot when it mentions @username. */
    username: z.string().regex(/^[A-Za-z0-9_]{5,32}$/, "the bot's username, without @"),
  }),
);

export interface TelegramBot {
  tenant: string;
  token: string;
  username: string;
  /** The bot's own user id: the token's first part. */
  id: string;
}

/** The bot serving `tenant` (TELEGRAM_BOTS), or undefined when the deployment has no such bot. */
export function botFor(env: Env, tenant: string): TelegramBot | undefined {
  const bots = parseJsonVar("TELEGRAM_BOTS", secretNamed(env, "TELEGRAM_BOTS"), botsSchema, "{}");
  const bot = Object.hasOwn(bots, tenant) ? bots[tenant] : undefined;
  return bot && { tenant, token: bot.token, username: bot.username, id: bot.token.split(":")[0]! };
}

/**
 * The secret_token a bot's webhook is set with (setWebhook), which Telegram
 * sends back in X-Telegram-Bot-Api-Secret-Token: an HMAC of the tenant under
 * TELEGRAM_WEBHOOK_SECRET, so each bot has its own and one secret makes them
 * all (register.mjs derives the same).
 */
export async function webhookSecretFor(env: Env, tenant: string): Promise<string> {
  const secret = secretNamed(env, "TELEGRAM_WEBHOOK_SECRET");
  if (!secret) throw new ConfigError("TELEGRAM_WEBHOOK_SECRET is not set: every Telegram webhook is refused without it");
  return hmacHex(secret, `telegram-webhook:${tenant}`);
}

/** The Bot API base; tests point it at the loopback fake. The token goes in its paths, so never plain http off this machine. */
export function apiBaseUrl(env: Env): string {
  return baseUrlFrom("TELEGRAM_API_BASE_URL", env.TELEGRAM_API_BASE_URL, DEFAULT_API_BASE_URL);
}

/** The one agent every bot serves (TELEGRAM_AGENT). */
export function agentName(env: Env): string {
  return env.TELEGRAM_AGENT?.trim() || DEFAULT_AGENT;
}

// What proves an update genuine: the secret_token its bot's webhook was set
// with (config.ts derives one per bot), which Telegram sends back in
// X-Telegram-Bot-Api-Secret-Token. Compared in constant time before the body
// is read; a wrong or missing one is a 401 and nothing is written.
import type { Context } from "hono";
import { HttpError, readBody, safeEqual } from "../../lib/http.ts";
import { botFor, webhookSecretFor, type TelegramBot } from "./config.ts";

/** An update is a few KiB; a message's text is at most 4,096 characters. */
const UPDATE_BODY = { contentTypes: ["application/json"], maxBytes: 256 * 1024 };

export const SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token";

/** The bot the update is for and its raw body: 401 unless the secret holds, 404 for a bot this deployment does not serve. */
export async function readUpdate(c: Context<{ Bindings: Env }>, tenant: string): Promise<{ bot: TelegramBot; raw: string }> {
  const expected = await webhookSecretFor(c.env, tenant);
  if (!safeEqual(c.req.header(SECRET_HEADER) ?? "", expected)) throw new HttpError(401, `missing or wrong ${SECRET_HEADER}`);
  const bot = botFor(c.env, tenant);
  if (!bot) throw new HttpError(404, `no Telegram bot is configured for tenant ${tenant}`);
  return { bot, raw: await readBody(c, UPDATE_BODY) };
}

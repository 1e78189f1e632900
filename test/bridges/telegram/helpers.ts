// Telegram as a test sees it: updates delivered to a bot's webhook with the
// secret_token its setWebhook was given (derived here independently of the
// bridge), recorded payloads replayed with new ids, and the fake Bot API's
// record of what the bot did.
import { env } from "cloudflare:workers";
import { worker } from "../../support.ts";

const E = env as unknown as Record<string, string>;
export const BOTS = JSON.parse(E.TELEGRAM_BOTS!) as Record<string, { token: string; username: string }>;
export const TENANT = "tgbot";
export const AGENT = "assistant";

/** HMAC-SHA256(TELEGRAM_WEBHOOK_SECRET, "telegram-webhook:<tenant>") in hex, as docs/telegram.md says to set it. */
export async function secretFor(tenant: string, secret = E.TELEGRAM_WEBHOOK_SECRET!): Promise<string> {
  const key = await crypto.subtle.importKey("raw", new TextEncoder().encode(secret), { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
  const mac = await crypto.subtle.sign("HMAC", key, new TextEncoder().encode(`telegram-webhook:${tenant}`));
  return [...new Uint8Array(mac)].map((b) => b.toString(16).padStart(2, "0")).join("");
}

/** Telegram delivering an update to the bot's webhook. */
export async function deliver(update: unknown, { tenant = TENANT, secret }: { tenant?: string; secret?: string | null } = {}): Promise<Response> {
  const token = secret === undefined ? await secretFor(tenant) : secret;
  const headers: Record<string, string> = { "content-type": "application/json" };
  if (token !== null) headers["x-telegram-bot-api-secret-token"] = token;
  return worker(`/telegram/${tenant}/webhook`, { method: "POST", headers, body: typeof update === "string" ? update : JSON.stringify(update) });
}

let next = Math.floor(Math.random() * 1e9);
/** A fresh update_id, message id or chat id. */
export const fresh = () => ++next;

export interface Call {
  bot: string;
  method: string;
  status: number;
  held?: boolean;
  params: {
    chat_id: string | number;
    text?: string;
    message_id?: number;
    message_thread_id?: number;
    parse_mode?: string;
    action?: string;
    reply_parameters?: { message_id: number };
    reply_markup?: { inline_keyboard: { text: string; callback_data: string }[][] };
  };
}

export async function calls(chat: string | number): Promise<Call[]> {
  return (await fetch(`${E.FAKE_TELEGRAM_URL}/_control/calls?chat=${chat}`)).json();
}

export interface Shown {
  message_id: number;
  text: string;
  message_thread_id?: number;
  reply_markup: Call["params"]["reply_markup"] | null;
  reply_to: number | null;
}

/** The chat's messages as they stand (their text without markup). */
export async function messagesIn(chat: string | number): Promise<Shown[]> {
  return (await fetch(`${E.FAKE_TELEGRAM_URL}/_control/messages?chat=${chat}`)).json();
}

export async function control(path: string, body: unknown, method = "POST"): Promise<void> {
  const res = await fetch(`${E.FAKE_TELEGRAM_URL}/_control/${path}`, { method, body: JSON.stringify(body) });
  if (!res.ok) throw new Error(`fake Telegram ${path}: ${res.status}`);
}

/**
 * What Telegram does with a webhook's answer that names a method: it makes
 * that call for the bot. Sent to the fake, so its answer is the Bot API's.
 */
export async function performAnswer(answer: { method?: string } & Record<string, unknown>, tenant = TENANT): Promise<{ ok: boolean; description?: string }> {
  const { method, ...params } = answer;
  return (await fetch(`${E.FAKE_TELEGRAM_URL}/bot${BOTS[tenant]!.token}/${method}`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(params) })).json();
}

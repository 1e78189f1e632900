// One call to the Bot API (POST <base>/bot<token>/<method>, JSON) and what its
// answer means to the outbox: Telegram answers {ok, result} or {ok: false,
// error_code, description, parameters}; a 429's parameters.retry_after is a
// wait (nothing was posted), a 5xx or no answer is tried again, a refusal that
// cannot change is given up, and one that means the bot can no longer post
// there (blocked, removed, the chat gone) says so.
import { sendTimeoutMs, type DeliveryResult } from "../../runtime/index.ts";
import { apiBaseUrl, type TelegramBot } from "./config.ts";

export interface BotApiAnswer {
  ok: boolean;
  result?: unknown;
  error_code?: number;
  description?: string;
  parameters?: { retry_after?: number; migrate_to_chat_id?: number };
}

/** The Bot API's answer to `method` with `params`; a network failure or a timeout throws. */
export async function callBotApi(env: Env, bot: TelegramBot, method: string, params: Record<string, unknown>, timeoutMs = sendTimeoutMs(env)): Promise<{ status: number; answer: BotApiAnswer }> {
  const res = await fetch(`${apiBaseUrl(env)}/bot${bot.token}/${method}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(params),
    signal: AbortSignal.timeout(timeoutMs),
  });
  const answer = (await res.json().catch(() => null)) as BotApiAnswer | null;
  return { status: res.status, answer: answer ?? { ok: false, error_code: res.status, description: res.statusText } };
}

/** Descriptions of refusals after which nothing more can be posted in the chat. */
const GONE = /bot was blocked|bot was kicked|user is deactivated|chat not found|not a member|have no rights to send|CHAT_WRITE_FORBIDDEN|group chat was upgraded/i;

/** An answer as the outbox reads it; `ref` is the message id of a message the call made or edited. */
export function deliveryOf(status: number, answer: BotApiAnswer): DeliveryResult {
  if (answer.ok) {
    const id = (answer.result as { message_id?: unknown } | undefined)?.message_id;
    return typeof id === "number" ? { ok: true, ref: String(id) } : { ok: true };
  }
  const code = answer.error_code ?? status;
  const error = `Telegram answered ${code}: ${answer.description ?? "no description"}`;
  if (code === 429) return { ok: false, error, retryAfterMs: Math.max(1, answer.parameters?.retry_after ?? 1) * 1000 };
  if (code >= 500) return { ok: false, error };
  return { ok: false, error, permanent: true, ...(code === 403 || GONE.test(answer.description ?? "") ? { unreachable: true } : {}) };
}

/** An edit to what the message already shows is refused so; it is done all the same. */
export const notModified = (answer: BotApiAnswer) => !answer.ok && /message is not modified/i.test(answer.description ?? "");
/** The message to edit is gone (a person deleted it). */
export const editTargetGone = (answer: BotApiAnswer) => !answer.ok && /message to edit not found|MESSAGE_ID_INVALID/i.test(answer.description ?? "");
/** Telegram could not read the HTML we rendered: the text is sent again as it is. */
export const unparsable = (answer: BotApiAnswer) => !answer.ok && /can't parse entities/i.test(answer.description ?? "");

// Telegram's side of the outbox, through the Bot API: a turn's status is a
// message (a reply to the person's message) that the answer is edited into,
// a card a message with an inline keyboard edited as its hold is decided,
// the rest new messages, in the chat and, in a forum, its topic. Text goes as
// HTML (html.ts), split at 4,096 characters. Paced per chat (Telegram asks
// for about one message a second in a chat, twenty a minute in a group) and
// per bot (thirty a second); a 429's retry_after holds them.
//
// The Bot API has no idempotency key and no way to read a chat back, so a
// message whose answer was lost cannot be looked for: it is sent again. The
// answer of a plain turn is an edit of its status message (answersInStatus),
// which repeats harmlessly.
import { cardText } from "../../approvals/index.ts";
import { clip, splitText } from "../../lib/text.ts";
import type { ChatOutbound, DeliveryResult, OutboundMessage, OutboxDelivery, PaceRule, ReplyAddress, Route, TypingSchedule } from "../../runtime/index.ts";
import { callBotApi, deliveryOf, editTargetGone, notModified, unparsable } from "./api.ts";
import { targetSchema, type TelegramTarget } from "./address.ts";
import { cardMessage, TELEGRAM_MESSAGE_LIMIT, type InlineKeyboard } from "./card.ts";
import { botFor, type TelegramBot } from "./config.ts";
import { markdownToHtml } from "./html.ts";
import { statusText } from "../shared/status.ts";

/** About one message a second in a chat, learned: sent at once until Telegram says otherwise. */
const CHAT_SPACING_MS = 1_000;
/** A group takes twenty a minute. */
const GROUP_SPACING_MS = 3_000;
/** A bot's thirty messages a second, all chats together. */
const BOT_SPACING_MS = 34;

interface Rendered {
  text: string;
  reply_markup?: InlineKeyboard;
}

function render(message: OutboundMessage): Rendered {
  switch (message.kind) {
    case "card":
      return cardMessage(message.card);
    case "status":
      return { text: markdownToHtml(clip(statusText(message), TELEGRAM_MESSAGE_LIMIT)) };
    default:
      return { text: markdownToHtml(clip(message.text, TELEGRAM_MESSAGE_LIMIT)) };
  }
}

/** The text as it was written, for when Telegram cannot parse what we rendered. */
function plainText(message: OutboundMessage): string {
  const text = message.kind === "card" ? cardText(message.card) : message.kind === "status" ? statusText(message) : message.text;
  return clip(text, TELEGRAM_MESSAGE_LIMIT);
}

/** Where a message goes: the chat, its topic, and the person's message it answers (a status, which opens the turn). */
function placement(target: TelegramTarget, message: OutboundMessage): Record<string, unknown> {
  const { replyTo } = target;
  return {
    chat_id: target.chatId,
    ...(target.threadId !== undefined ? { message_thread_id: target.threadId } : {}),
    ...(replyTo !== undefined && message.kind === "status" ? { reply_parameters: { message_id: replyTo, allow_sending_without_reply: true } } : {}),
  };
}

/** Posts or edits once; if Telegram cannot parse the HTML, once more as plain text. */
async function call(env: Env, bot: TelegramBot, method: string, params: Record<string, unknown>, rendered: Rendered, plain: string) {
  const first = await callBotApi(env, bot, method, { ...params, ...rendered, parse_mode: "HTML", link_preview_options: { is_disabled: true } });
  if (!unparsable(first.answer)) return first;
  return callBotApi(env, bot, method, { ...params, ...rendered, text: plain });
}

async function deliver(env: Env, delivery: OutboxDelivery): Promise<DeliveryResult> {
  const target = targetSchema.safeParse(delivery.address.target);
  if (!target.success) return { ok: false, error: "reply address is not a Telegram chat", permanent: true };
  const bot = botFor(env, delivery.route.tenant);
  if (!bot) return { ok: false, error: `no Telegram bot is configured for tenant ${delivery.route.tenant} (TELEGRAM_BOTS)`, permanent: true };
  const { message } = delivery;
  const rendered = render(message);
  const plain = plainText(message);
  const ref = delivery.ref !== undefined && /^\d{1,12}$/.test(delivery.ref) ? Number(delivery.ref) : undefined;
  if (ref !== undefined) {
    const edited = await call(env, bot, "editMessageText", { chat_id: target.data.chatId, message_id: ref }, rendered, plain);
    if (notModified(edited.answer)) return { ok: true, ref: String(ref) };
    // A reply whose status message a person deleted is posted instead of lost.
    if (!(message.kind === "reply" && editTargetGone(edited.answer))) return withRef(deliveryOf(edited.status, edited.answer), ref);
  }
  const sent = await call(env, bot, "sendMessage", placement(target.data, message), rendered, plain);
  return deliveryOf(sent.status, sent.answer);
}

/** An edit keeps naming the message it edited. */
const withRef = (result: DeliveryResult, ref: number): DeliveryResult => (result.ok ? { ...result, ref: String(ref) } : result);

/** Per chat (learned: at once until a 429, then a second apart, three in a group) and per bot. */
function paceOf(delivery: OutboxDelivery): PaceRule[] {
  const target = targetSchema.safeParse(delivery.address.target);
  if (!target.success) return [];
  const keeper = `telegram:${delivery.route.tenant}`;
  return [
    { key: `${keeper}:chat:${target.data.chatId}`, keeper, spacingMs: target.data.direct ? CHAT_SPACING_MS : GROUP_SPACING_MS, burst: 2, pacedAfterHold: true },
    { key: `${keeper}:bot`, spacingMs: BOT_SPACING_MS },
  ];
}

/** "typing…" in the chat (and topic): it lasts five seconds, or until the bot sends a message, so it is sent again every four. */
const TYPING: TypingSchedule = { firstMs: 0, everyMs: 4_000 };

async function typing(env: Env, _route: Route, address: ReplyAddress): Promise<DeliveryResult> {
  const target = targetSchema.safeParse(address.target);
  if (!target.success) return { ok: false, error: "reply address is not a Telegram chat", permanent: true };
  const bot = botFor(env, target.data.tenant);
  if (!bot) return { ok: false, error: `no Telegram bot is configured for tenant ${target.data.tenant} (TELEGRAM_BOTS)`, permanent: true };
  const thread = target.data.threadId !== undefined ? { message_thread_id: target.data.threadId } : {};
  const { status, answer } = await callBotApi(env, bot, "sendChatAction", { chat_id: target.data.chatId, ...thread, action: "typing" });
  return deliveryOf(status, answer);
}

export const telegramOutbound: ChatOutbound = {
  platform: "telegram",
  split: (text) => splitText(text, TELEGRAM_MESSAGE_LIMIT),
  deliver,
  paceOf,
  typing,
  typingSchedule: () => TYPING,
  // The status message is edited into the answer: a plain turn is one post and one edit, and the answer never shows twice.
  answersInStatus: () => true,
  updateSpacingMs: CHAT_SPACING_MS,
  isDirect: (_by, address) => address?.target.direct === true,
};

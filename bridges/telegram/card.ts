// An approval card as a Telegram message: its text, and while a decision is
// possible an inline keyboard of Approve and Deny. A button's callback_data
// holds at most 64 bytes, too few for the card's decision value (tenant,
// agent and hold): it carries the verdict and the hold, and the callback_query
// that brings it back, which only this bot's own messages can send, binds it
// to the bot's tenant and agent (ingress.ts).
import { cardText, parseDecisionValue, type Card } from "../../approvals/index.ts";
import { clip } from "../../lib/text.ts";
import { markdownToHtml } from "./html.ts";

/** A message's text is at most 4,096 characters (after its entities are parsed). */
export const TELEGRAM_MESSAGE_LIMIT = 4096;

export interface InlineKeyboard {
  inline_keyboard: { text: string; callback_data: string }[][];
}

/** "a:<hold>" approves, "d:<hold>" denies. */
const CALLBACK = /^([ad]):(h[0-9a-f]{1,40})$/;

export function callbackData(value: string): string | null {
  const decision = parseDecisionValue(value);
  return decision ? `${decision.approve ? "a" : "d"}:${decision.holdId}` : null;
}

export function parseCallbackData(data: string): { holdId: string; approve: boolean } | null {
  const match = CALLBACK.exec(data);
  return match ? { approve: match[1] === "a", holdId: match[2]! } : null;
}

/** The card's text as HTML, and its buttons while it is pending (an empty keyboard removes them). */
export function cardMessage(card: Card): { text: string; reply_markup: InlineKeyboard } {
  const approve = card.actions && callbackData(card.actions.approve);
  const deny = card.actions && callbackData(card.actions.deny);
  const buttons = approve && deny ? [[{ text: "Approve", callback_data: approve }, { text: "Deny", callback_data: deny }]] : [];
  return { text: markdownToHtml(clip(cardText(card), TELEGRAM_MESSAGE_LIMIT)), reply_markup: { inline_keyboard: buttons } };
}

// Telegram's ids and the reply address the ingress writes and the outbound
// reads back: a chat, and in a forum its topic. A stored address is data, not
// a promise: it is checked again on the way out.
import * as z from "zod";
import type { ReplyAddress } from "../../runtime/index.ts";

/** A chat id: an integer (groups' are negative), kept as text: a supergroup's has 13 digits. */
export const chatId = z.string().regex(/^-?\d{1,20}$/, "a Telegram chat id (an integer)");

export const targetSchema = z.object({
  /** The bot's tenant: whose token sends there (the typing indicator is handed the address alone). */
  tenant: z.string().min(1),
  chatId,
  /** The forum topic (message_thread_id) a conversation lives in. */
  threadId: z.number().int().positive().optional(),
  /** A private chat: one person's direct messages. */
  direct: z.boolean(),
  /** The person's message that started the turn: the status message answers it. */
  replyTo: z.number().int().positive().optional(),
});
export type TelegramTarget = z.infer<typeof targetSchema>;

export function telegramAddress(target: TelegramTarget): ReplyAddress {
  return { platform: "telegram", target: { ...target } };
}

/**
 * A chat is one conversation, `chat<id>` (a group's id is negative, and a
 * conversation id starts with a letter or digit); a forum topic is its own,
 * `chat<id>:<topic>`.
 */
export const conversationOf = (target: Pick<TelegramTarget, "chatId" | "threadId">): string =>
  target.threadId === undefined ? `chat${target.chatId}` : `chat${target.chatId}:${target.threadId}`;

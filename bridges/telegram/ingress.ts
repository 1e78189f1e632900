// Telegram updates into ChatEvents. Each bot's webhook (POST
// /telegram/<tenant>/webhook) is verified first (verify.ts); its update_id is
// the event id, so a delivery Telegram retries is one event. A private chat
// is a conversation, as is a group; a forum topic is its own. In a group the
// bot hears only what is addressed to it (a mention, a reply to it, a
// command): Telegram's privacy mode sends no more. /stop, /compact and
// /status are commands; a click on a card's inline keyboard a decision.
// Answers that need no message of ours to be found again (a command's
// notice, a click's answerCallbackQuery) ride on the webhook's own answer.
import type { Context } from "hono";
import * as z from "zod";
import { HttpError, parseJson } from "../../lib/http.ts";
import { clip } from "../../lib/text.ts";
import {
  type ChatCommand,
  type ChatUser,
  FETCH_DEADLINE_MS,
  fetchFiles,
  IMAGE_MAX_BYTES,
  parseRoute,
  rememberPerson,
  type Route,
  type SharedFile,
  submitEvent,
} from "../../runtime/index.ts";
import { conversationId } from "../shared/ids.ts";
import { conversationOf, telegramAddress, type TelegramTarget } from "./address.ts";
import { callBotApi } from "./api.ts";
import { parseCallbackData, TELEGRAM_MESSAGE_LIMIT } from "./card.ts";
import { agentName, apiBaseUrl, type TelegramBot } from "./config.ts";
import { readUpdate } from "./verify.ts";

const userSchema = z.looseObject({ id: z.int(), is_bot: z.boolean(), first_name: z.string(), last_name: z.string().optional(), username: z.string().optional() });
type TelegramUser = z.infer<typeof userSchema>;
const chatSchema = z.looseObject({ id: z.int(), type: z.enum(["private", "group", "supergroup", "channel"]) });
const entitySchema = z.looseObject({ type: z.string(), offset: z.int(), length: z.int(), user: userSchema.optional() });
const placeSchema = { message_id: z.int(), chat: chatSchema, message_thread_id: z.int().optional(), is_topic_message: z.boolean().optional() };
const fileSchema = { file_id: z.string().min(1), file_unique_id: z.string(), file_size: z.int().nonnegative().optional() };

const messageSchema = z.looseObject({
  ...placeSchema,
  from: userSchema.optional(),
  text: z.string().optional(),
  caption: z.string().optional(),
  entities: z.array(entitySchema).optional(),
  caption_entities: z.array(entitySchema).optional(),
  reply_to_message: z.looseObject({ message_id: z.int(), from: userSchema.optional() }).optional(),
  photo: z.array(z.looseObject({ ...fileSchema, width: z.number(), height: z.number() })).optional(),
  document: z.looseObject({ ...fileSchema, file_name: z.string().optional(), mime_type: z.string().optional() }).optional(),
});
type TelegramMessage = z.infer<typeof messageSchema>;

const updateSchema = z.looseObject({
  update_id: z.int().nonnegative(),
  message: messageSchema.optional(),
  callback_query: z.looseObject({ id: z.string().min(1), from: userSchema, message: z.looseObject(placeSchema).optional(), data: z.string().optional() }).optional(),
});

/** answerCallbackQuery shows at most 200 characters. */
const CALLBACK_ANSWER_LIMIT = 200;

const COMMANDS = new Map<string, ChatCommand>([["stop", "stop"], ["compact", "compact"], ["status", "status"]]);

/** The person as Telegram shows them: first and last name. */
const nameOf = (user: TelegramUser) => [user.first_name, user.last_name].filter(Boolean).join(" ");
const chatUser = (user: TelegramUser): ChatUser => ({ platform: "telegram", id: String(user.id), name: nameOf(user) });

/** The chat, and in a forum the topic, a message or a click came from. */
function placeOf(bot: TelegramBot, message: z.infer<z.ZodObject<typeof placeSchema>>): TelegramTarget {
  const threadId = message.is_topic_message && message.message_thread_id !== undefined ? message.message_thread_id : undefined;
  return { tenant: bot.tenant, chatId: String(message.chat.id), ...(threadId !== undefined ? { threadId } : {}), direct: message.chat.type === "private" };
}

/** The name goes to the people directory (the console and the trail show it for telegram:<bot>:<user>), after the answer. */
function rememberName(c: Context<{ Bindings: Env }>, route: Route, user: TelegramUser): void {
  c.executionCtx.waitUntil(rememberPerson(c.env, { identity: `telegram:${route.tenant}:${user.id}`, name: nameOf(user) }).catch(() => undefined));
}

export async function handleUpdate(c: Context<{ Bindings: Env }>): Promise<Response> {
  const tenant = c.req.param("tenant") ?? "";
  const { bot, raw } = await readUpdate(c, tenant);
  const parsed = updateSchema.safeParse(parseJson(raw));
  if (!parsed.success) throw new HttpError(400, `not a Telegram update: ${z.prettifyError(parsed.error)}`);
  const update = parsed.data;
  const route = parseRoute(bot.tenant, agentName(c.env));
  if (update.message) return onMessage(c, bot, route, update.update_id, update.message);
  if (update.callback_query) return onClick(c, bot, route, update.update_id, update.callback_query);
  // Edits, reactions, membership changes: nothing the agent acts on.
  return c.json({ ignored: "an update of a kind the bridge does not handle" });
}

/** The command a message opens with, for this bot ("/stop" or "/stop@this_bot"); null when none, or another bot's. */
function commandOf(bot: TelegramBot, text: string, entities: TelegramMessage["entities"]): { name: string; length: number } | null {
  const entity = entities?.find((e) => e.type === "bot_command" && e.offset === 0);
  if (!entity) return null;
  const [name, addressee] = text.slice(1, entity.length).split("@");
  if (addressee !== undefined && addressee.toLowerCase() !== bot.username.toLowerCase()) return null;
  return { name: name!.toLowerCase(), length: entity.length };
}

/** In a group: is the message for this bot (it is mentioned, replied to, or given a command)? */
function addressed(bot: TelegramBot, message: TelegramMessage, text: string, entities: TelegramMessage["entities"]): boolean {
  if (message.reply_to_message?.from?.id === Number(bot.id)) return true;
  return (entities ?? []).some(
    (e) =>
      (e.type === "mention" && text.slice(e.offset, e.offset + e.length).toLowerCase() === `@${bot.username.toLowerCase()}`) ||
      (e.type === "text_mention" && e.user?.id === Number(bot.id)) ||
      (e.type === "bot_command" && e.offset === 0 && commandOf(bot, text, entities) !== null),
  );
}

async function onMessage(c: Context<{ Bindings: Env }>, bot: TelegramBot, route: Route, updateId: number, message: TelegramMessage): Promise<Response> {
  const from = message.from;
  // The agent never answers a bot (itself included), nor a channel's posts.
  if (!from || from.is_bot || message.chat.type === "channel") return c.json({ ignored: "not a person's message" });
  const text = message.text ?? message.caption ?? "";
  const entities = message.entities ?? message.caption_entities;
  const place = placeOf(bot, message);
  if (!place.direct && !addressed(bot, message, text, entities)) return c.json({ ignored: "not addressed to the bot" });
  rememberName(c, route, from);
  const base = {
    id: `telegram:update:${updateId}`,
    conversation: conversationId(conversationOf(place), "the chat and topic"),
    user: chatUser(from),
    replyTo: telegramAddress({ ...place, replyTo: message.message_id }),
  };

  const command = commandOf(bot, text, entities);
  const chatCommand = command && COMMANDS.get(command.name);
  if (chatCommand) {
    const result = await submitEvent(c.env, route, { ...base, kind: "command", command: chatCommand });
    if (!result.accepted || !result.notice) return c.json({ accepted: result.accepted });
    // The notice is the webhook's answer: a sendMessage Telegram makes for us, answering the command.
    return c.json({
      method: "sendMessage",
      chat_id: message.chat.id,
      ...(place.threadId !== undefined ? { message_thread_id: place.threadId } : {}),
      text: clip(result.notice, TELEGRAM_MESSAGE_LIMIT),
      reply_parameters: { message_id: message.message_id, allow_sending_without_reply: true },
    });
  }

  const said = withoutMention(bot, text).trim();
  const files = sharedFiles(message);
  if (said === "" && files.length === 0) return c.json({ ignored: "no text" });
  const attachments = files.length > 0 ? await fetchFiles(await withLinks(c.env, bot, files), { platform: "Telegram" }) : [];
  const result = await submitEvent(c.env, route, { ...base, kind: "message", text: said, ...(attachments.length > 0 ? { attachments } : {}) });
  return c.json(result);
}

/** "@this_bot do this" reads as "do this" to the agent. */
const withoutMention = (bot: TelegramBot, text: string) => text.replace(new RegExp(`@${bot.username}\\b`, "gi"), "");

/** A file as Telegram describes it, with the file_id its link is asked for by. */
type TelegramFile = Omit<SharedFile, "url"> & { fileId: string };

/** The photo (the largest size the agent reads, else the largest) and the document a message carries. */
function sharedFiles(message: TelegramMessage): TelegramFile[] {
  const files: TelegramFile[] = [];
  if (message.photo && message.photo.length > 0) {
    const sizes = [...message.photo].sort((a, b) => (a.file_size ?? a.width * a.height) - (b.file_size ?? b.width * b.height));
    const photo = sizes.filter((p) => (p.file_size ?? 0) <= IMAGE_MAX_BYTES).at(-1) ?? sizes.at(-1)!;
    files.push({ fileId: photo.file_id, name: `photo-${photo.file_unique_id}.jpg`, mimeType: "image/jpeg", bytes: photo.file_size ?? 0 });
  }
  const doc = message.document;
  if (doc) files.push({ fileId: doc.file_id, name: doc.file_name ?? `file-${doc.file_unique_id}`, mimeType: doc.mime_type ?? "application/octet-stream", bytes: doc.file_size ?? 0 });
  return files;
}

/** Each file's download link (getFile, then <base>/file/bot<token>/<file_path>); a file Telegram gives no link to is named. */
function withLinks(env: Env, bot: TelegramBot, files: TelegramFile[]): Promise<SharedFile[]> {
  return Promise.all(
    files.map(async ({ fileId, ...file }) => {
      const path = await callBotApi(env, bot, "getFile", { file_id: fileId }, FETCH_DEADLINE_MS).then(
        ({ answer }) => (answer.ok ? (answer.result as { file_path?: unknown }).file_path : undefined),
        () => undefined,
      );
      return { ...file, url: typeof path === "string" ? new URL(`${apiBaseUrl(env)}/file/bot${bot.token}/${path}`) : null };
    }),
  );
}

type CallbackQuery = NonNullable<z.infer<typeof updateSchema>["callback_query"]>;

/** A click on an inline keyboard: a card's decision, answered (answerCallbackQuery) by the webhook's answer. */
async function onClick(c: Context<{ Bindings: Env }>, bot: TelegramBot, route: Route, updateId: number, query: CallbackQuery): Promise<Response> {
  const answer = (text?: string, alert = false) => c.json({ method: "answerCallbackQuery", callback_query_id: query.id, ...(text ? { text: clip(text, CALLBACK_ANSWER_LIMIT), show_alert: alert } : {}) });
  const decision = parseCallbackData(query.data ?? "");
  // Not a card's button (or a message too old to say where it is): acknowledged, nothing done.
  if (!decision || !query.message) return answer();
  rememberName(c, route, query.from);
  const place = placeOf(bot, query.message);
  const result = await submitEvent(c.env, route, {
    id: `telegram:update:${updateId}`,
    conversation: conversationId(conversationOf(place), "the chat and topic"),
    user: chatUser(query.from),
    kind: "decision",
    holdId: decision.holdId,
    approve: decision.approve,
    // Only this bot's own messages bring its callbacks: the button is bound to the bot's tenant and agent.
    boundTo: route,
  });
  // The deciding click is told quietly (the card is edited for everyone through the outbox); a refused one in an alert.
  if (result.decided) return answer(decision.approve ? "Approved." : "Denied.");
  return answer(result.notice ?? "Already received.", true);
}

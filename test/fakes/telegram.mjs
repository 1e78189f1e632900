// A fake Telegram Bot API on loopback, written from the Bot API reference
// (core.telegram.org/bots/api): POST /bot<token>/<method> with a JSON body,
// answered {ok: true, result} or {ok: false, error_code, description,
// parameters?}. It is strict where Telegram is: an unknown token is 401
// "Unauthorized", an unknown method 404 "Not Found", a missing chat_id or
// text, a text over 4,096 characters (after entities), HTML it cannot parse,
// a callback_data over 64 bytes, an unknown chat action, an edit of a message
// that does not exist or to what it shows already, an answer to a callback
// query it never issued (or a second one) are each the 400 Telegram gives.
// It serves the methods the bridge and its register script use:
// sendMessage, editMessageText, sendChatAction, answerCallbackQuery, getFile
// (and GET /file/bot<token>/<path>), setMyCommands, setWebhook, getMe.
// Every call is recorded; the control API is under /_control:
//   GET  /_control/calls?chat=      the calls (with their answers' status)
//   GET  /_control/messages?chat=   the messages as they stand (text without markup)
//   POST /_control/rate-limit {chat, times, retryAfter}: the next `times` sends
//        or edits in the chat are answered 429 with parameters.retry_after
//   POST /_control/hold {chat, textIncludes}: the next message made or edited
//        in the chat to that text is, and its answer never comes (a lost answer)
//   POST /_control/callback-query {id}: Telegram issued this callback query id
//   POST /_control/block {chat}: the person blocked the bot: every send or edit
//        there is answered 403 "Forbidden: bot was blocked by the user"
//   PUT  /_control/files/<file_id> {base64, path}: a file getFile finds
import { Gates } from "./gates.mjs";
import { listen, readBody, sendJson } from "./http.mjs";

/** The bots the fake knows, as TELEGRAM_BOTS names them: tenant → token and username. */
export const TELEGRAM_BOTS = {
  tgbot: { token: "8765336106:AAFakeTokenForTheRecordedBotOnLoopback01", username: "vercelchatsdkbot" },
  tgbot2: { token: "7000000002:AAFakeTokenForTheSecondBotOnLoopback0002", username: "second_test_bot" },
};
export const TELEGRAM_WEBHOOK_SECRET = "test-telegram-webhook-secret";

const TEXT_LIMIT = 4096;
const CALLBACK_DATA_LIMIT = 64;
const CHAT_ACTIONS = new Set(["typing", "upload_photo", "record_video", "upload_video", "record_voice", "upload_voice", "upload_document", "choose_sticker", "find_location", "record_video_note", "upload_video_note"]);
const HTML_TAGS = new Set(["b", "strong", "i", "em", "u", "ins", "s", "strike", "del", "a", "code", "pre", "tg-spoiler", "span", "blockquote", "tg-emoji"]);

const bad = (description) => ({ status: 400, body: { ok: false, error_code: 400, description: `Bad Request: ${description}` } });
const ok = (result) => ({ status: 200, body: { ok: true, result } });

/** The text Telegram shows for `text` in `parseMode`, or an error naming what it cannot parse. */
export function parsed(text, parseMode) {
  if (parseMode === undefined || parseMode === "") return { text };
  if (parseMode !== "HTML") return parseMode === "MarkdownV2" || parseMode === "Markdown" ? { text } : { error: "unsupported parse_mode" };
  const open = [];
  let plain = "";
  const re = /<(\/?)([a-z-]+)([^>]*)>|&(lt|gt|amp|quot|#\d+|#x[0-9a-f]+);|([<>&])|([^<>&]+)/gi;
  for (const m of text.matchAll(re)) {
    if (m[2] !== undefined) {
      const tag = m[2].toLowerCase();
      if (!HTML_TAGS.has(tag)) return { error: `can't parse entities: Unsupported start tag "${tag}" at byte offset ${m.index}` };
      if (m[1] === "/") {
        if (open.pop() !== tag) return { error: `can't parse entities: Can't find end tag corresponding to start tag "${tag}"` };
      } else open.push(tag);
    } else if (m[4] !== undefined) {
      plain += { lt: "<", gt: ">", amp: "&", quot: '"' }[m[4].toLowerCase()] ?? String.fromCodePoint(Number(m[4].replace(/^#x?/i, (p) => (p.length > 1 ? "0x" : ""))));
    } else if (m[5] !== undefined) {
      return { error: `can't parse entities: Unexpected end of name token at byte offset ${m.index}` };
    } else plain += m[6];
  }
  if (open.length > 0) return { error: `can't parse entities: Can't find end tag corresponding to start tag "${open.at(-1)}"` };
  return { text: plain };
}

function keyboardError(markup) {
  for (const row of markup?.inline_keyboard ?? []) {
    for (const button of row) {
      if (typeof button.text !== "string" || button.text === "") return "text buttons are unallowed in the inline keyboard";
      if (button.callback_data !== undefined && Buffer.byteLength(String(button.callback_data)) > CALLBACK_DATA_LIMIT) return "BUTTON_DATA_INVALID";
    }
  }
  return null;
}

export async function startTelegram({ gates = new Gates() } = {}) {
  const tokens = new Map(Object.values(TELEGRAM_BOTS).map((bot) => [bot.token, bot]));
  const calls = [];
  /** chat id → [{ message_id, chat_id, message_thread_id?, text, html, reply_markup }] */
  const chats = new Map();
  const nextIds = new Map();
  const rateLimits = [];
  const holds = [];
  const issuedQueries = new Map(); // id → answered?
  const files = new Map(); // file_id → { path, bytes }
  const blocked = new Set();
  const messagesOf = (chat) => chats.get(String(chat)) ?? chats.set(String(chat), []).get(String(chat));

  const methods = {
    getMe: (bot) => ok({ id: Number(bot.token.split(":")[0]), is_bot: true, first_name: bot.username, username: bot.username }),
    async sendMessage(bot, p, call) {
      if (p.chat_id === undefined || p.chat_id === "") return bad("chat_id is empty");
      if (typeof p.text !== "string" || p.text.trim() === "") return bad("message text is empty");
      const shown = parsed(p.text, p.parse_mode);
      if (shown.error) return bad(shown.error);
      if (shown.text.length > TEXT_LIMIT) return bad("message is too long");
      const keyboard = keyboardError(p.reply_markup);
      if (keyboard) return bad(keyboard);
      const limited = limitedAnswer(p.chat_id);
      if (limited) return limited;
      const chat = String(p.chat_id);
      // Each bot has its own message ids (its own copy of a private chat).
      const counter = `${bot.username}/${chat}`;
      const id = (nextIds.get(counter) ?? 100) + 1;
      nextIds.set(counter, id);
      const message = { bot: bot.username, message_id: id, chat_id: chat, ...(p.message_thread_id !== undefined ? { message_thread_id: p.message_thread_id } : {}), text: shown.text, html: p.text, reply_markup: p.reply_markup ?? null, reply_to: p.reply_parameters?.message_id ?? null };
      messagesOf(chat).push(message);
      await made(call, chat, shown.text);
      return ok({ message_id: id, date: Math.floor(Date.now() / 1000), chat: { id: Number(chat), type: Number(chat) < 0 ? "supergroup" : "private" }, text: shown.text, ...(p.message_thread_id !== undefined ? { message_thread_id: p.message_thread_id } : {}) });
    },
    async editMessageText(bot, p, call) {
      if (p.chat_id === undefined) return bad("chat_id is empty");
      if (typeof p.text !== "string" || p.text.trim() === "") return bad("message text is empty");
      // A bot edits only its own messages.
      const message = messagesOf(p.chat_id).find((m) => m.bot === bot.username && m.message_id === Number(p.message_id));
      if (!message) return bad("message to edit not found");
      const shown = parsed(p.text, p.parse_mode);
      if (shown.error) return bad(shown.error);
      if (shown.text.length > TEXT_LIMIT) return bad("MESSAGE_TOO_LONG");
      const keyboard = keyboardError(p.reply_markup);
      if (keyboard) return bad(keyboard);
      const markup = p.reply_markup ?? null;
      if (message.html === p.text && JSON.stringify(message.reply_markup) === JSON.stringify(markup)) {
        return bad("message is not modified: specified new message content and reply markup are exactly the same as a current content and reply markup of the message");
      }
      const limited = limitedAnswer(p.chat_id);
      if (limited) return limited;
      Object.assign(message, { text: shown.text, html: p.text, reply_markup: markup });
      await made(call, String(p.chat_id), shown.text);
      return ok({ message_id: message.message_id, chat: { id: Number(message.chat_id) }, text: shown.text });
    },
    sendChatAction(bot, p) {
      if (p.chat_id === undefined) return bad("chat_id is empty");
      if (!CHAT_ACTIONS.has(p.action)) return bad("wrong parameter action in request");
      return limitedAnswer(p.chat_id) ?? ok(true);
    },
    answerCallbackQuery(bot, p) {
      if (!issuedQueries.has(p.callback_query_id) || issuedQueries.get(p.callback_query_id)) return bad("query is too old and response timeout expired or query ID is invalid");
      if (p.text !== undefined && String(p.text).length > 200) return bad("MESSAGE_TOO_LONG");
      issuedQueries.set(p.callback_query_id, true);
      return ok(true);
    },
    getFile(bot, p) {
      const file = files.get(p.file_id);
      if (!file) return bad("invalid file_id");
      return ok({ file_id: p.file_id, file_unique_id: `u${p.file_id}`, file_size: file.bytes.length, file_path: file.path });
    },
    setMyCommands(bot, p) {
      if (!Array.isArray(p.commands)) return bad("can't parse commands JSON object");
      for (const c of p.commands) {
        if (!/^[a-z0-9_]{1,32}$/.test(c.command ?? "")) return bad("BOT_COMMAND_INVALID");
        if (typeof c.description !== "string" || c.description.length < 1 || c.description.length > 256) return bad("BOT_COMMAND_DESCRIPTION_INVALID");
      }
      return ok(true);
    },
    setWebhook(bot, p) {
      if (typeof p.url !== "string" || !/^https:\/\//.test(p.url)) return bad("bad webhook: An HTTPS URL must be provided for webhook");
      if (p.secret_token !== undefined && !/^[A-Za-z0-9_-]{1,256}$/.test(p.secret_token)) return bad("secret token contains unallowed characters");
      return ok(true);
    },
  };

  /** A message was made or edited: a test may hold the answer (a lost connection), and a harness hears of it. */
  async function made(call, chat, text) {
    const held = holds.findIndex((h) => h.chat === chat && text.includes(h.textIncludes));
    if (held >= 0) {
      holds.splice(held, 1);
      call.held = true;
      gates.holdOnce("telegram", (c) => c === call);
    }
    await gates.pass("telegram", call);
  }

  function limitedAnswer(chat) {
    if (blocked.has(String(chat))) return { status: 403, body: { ok: false, error_code: 403, description: "Forbidden: bot was blocked by the user" } };
    const limit = rateLimits.find((l) => l.chat === String(chat) && l.times > 0);
    if (!limit) return null;
    limit.times--;
    return { status: 429, body: { ok: false, error_code: 429, description: `Too Many Requests: retry after ${limit.retryAfter}`, parameters: { retry_after: limit.retryAfter } } };
  }

  return listen(async (req, res) => {
    const url = new URL(req.url, "http://x");
    const raw = await readBody(req);

    if (url.pathname === "/_control/calls" && req.method === "GET") {
      const chat = url.searchParams.get("chat");
      return sendJson(res, 200, calls.filter((c) => chat === null || String(c.params.chat_id) === chat));
    }
    if (url.pathname === "/_control/messages" && req.method === "GET") return sendJson(res, 200, messagesOf(url.searchParams.get("chat")));
    if (url.pathname === "/_control/rate-limit" && req.method === "POST") {
      const { chat, times = 1, retryAfter = 1 } = JSON.parse(raw);
      rateLimits.push({ chat: String(chat), times, retryAfter });
      return sendJson(res, 200, { ok: true });
    }
    if (url.pathname === "/_control/hold" && req.method === "POST") {
      const { chat, textIncludes = "" } = JSON.parse(raw);
      holds.push({ chat: String(chat), textIncludes });
      return sendJson(res, 200, { ok: true });
    }
    if (url.pathname === "/_control/block" && req.method === "POST") {
      blocked.add(String(JSON.parse(raw).chat));
      return sendJson(res, 200, { ok: true });
    }
    if (url.pathname === "/_control/callback-query" && req.method === "POST") {
      issuedQueries.set(JSON.parse(raw).id, false);
      return sendJson(res, 200, { ok: true });
    }
    const fileControl = /^\/_control\/files\/(.+)$/.exec(url.pathname);
    if (fileControl && req.method === "PUT") {
      const { base64, path } = JSON.parse(raw);
      files.set(fileControl[1], { path, bytes: Buffer.from(base64, "base64") });
      return sendJson(res, 200, { ok: true });
    }
    const download = /^\/file\/bot([^/]+)\/(.+)$/.exec(url.pathname);
    if (download && req.method === "GET") {
      const file = [...files.values()].find((f) => f.path === download[2]);
      if (!tokens.has(download[1]) || !file) return sendJson(res, 404, { ok: false, error_code: 404, description: "Not Found" });
      res.writeHead(200, { "content-length": file.bytes.length });
      return res.end(file.bytes);
    }

    const route = /^\/bot([^/]+)\/([A-Za-z]+)$/.exec(url.pathname);
    if (!route) return sendJson(res, 404, { ok: false, error_code: 404, description: "Not Found" });
    const bot = tokens.get(route[1]);
    if (!bot) return sendJson(res, 401, { ok: false, error_code: 401, description: "Unauthorized" });
    // Method names are case-insensitive.
    const method = Object.keys(methods).find((name) => name.toLowerCase() === route[2].toLowerCase());
    if (!method) return sendJson(res, 404, { ok: false, error_code: 404, description: "Not Found: method not found" });
    let params;
    try {
      params = raw ? JSON.parse(raw) : {};
    } catch {
      return sendJson(res, 400, { ok: false, error_code: 400, description: "Bad Request: can't parse JSON" });
    }
    const call = { bot: bot.username, method, params, at: Date.now() };
    calls.push(call);
    const { status, body } = await methods[method](bot, params, call);
    call.status = status;
    sendJson(res, status, body);
    // A harness may wait until a message's answer has left (the fault harness's kill points).
    gates.tell("telegram-answered", call);
  });
}

// A fake Slack Web API on loopback: chat.postMessage, chat.update, chat.delete, the stream methods,
// conversations.replies, conversations.history, conversations.info, users.info, views.publish,
// auth.test, oauth.v2.access, plus response_url targets. It checks bearer
// tokens and Slack's text limit like Slack does, keeps posted messages with
// their metadata (served back by conversations.replies/history only with
// include_all_metadata, as Slack does), and records every call. Control API:
//   GET  /_control/calls?channel=&method=&from=   recorded calls, in order (from: only those from that index on)
//   POST /_control/rate-limit              {method, channel, textIncludes? (of text or markdown_text), times, retryAfter}: answer 429 that many times
//   POST /_control/hold                    {method, channel, textIncludes?, ms?}: the next such call is made (a post is posted) but answered only after ms, or never
//   POST /_control/drop                    {method, channel}: the next such call is recorded (dropped: true), not made, and its
//                                          connection closed with no answer, as a platform that goes away mid-call
//   PUT  /_control/oauth/<code>             {team, teamName?, enterprise?, enterpriseName?, token, botUserId}: an OAuth code oauth.v2.access will accept
//   GET  /_control/responses/<id>           what was POSTed to <url>/response/<id>
//   PUT  /_control/directory              {channels?: {C…: name}, users?: {U…: {name, real_name?, display_name?}}}: what conversations.info and users.info know
//   PUT  /_control/files/<id>/<name>        {base64, mimetype}: a file served at <url>/files-pri/<id>/<name>
//                                          (url_private) to a known bot token only (403 without one)
//   GET  /_control/file-fetches             [{path, token, status, bytes}]: the file downloads, in order
//   POST /_control/revoke                   {token}: calls with it are answered token_revoked from now on
//   GET  /_control/messages?channel=        the channel's messages as they stand now (text, thread_ts, ts, streaming)
//   POST /_control/refuse-streaming         {channel}: chat.startStream there answers unknown_method (a workspace without streaming)
//   POST /_control/pace                     {channels, spacingMs?, burst?}: in those channels chat.postMessage posts one message
//                                          per spacingMs on average (1000: Slack's one a second), `burst` (1; Slack: "short
//                                          bursts >1 allowed") back to back after a quiet spell; 429 + Retry-After (whole seconds) otherwise
//   POST /_control/expire-streams           {channel, afterAppends}: a stream there ends after that many appends, as
//                                          Slack's expire: later appends and stops answer message_not_in_streaming_state
//   POST /_control/limits                   {channel, streamIdleMs?, statusExpiryMs?}: Slack's clocks, shortened there for a test
//                                          (Slack's own by default: a stream ends 5 minutes after its last append, a status
//                                          goes 2 minutes after it was set)
//   GET  /_control/status?channel=&thread_ts=  an assistant thread's status as it stands now: {status, at} (when it was set),
//                                          status "" once it expired or a message of the bot's came into the thread
// A message's text is its markdown_text when it was sent so (chat.postMessage, chat.update and the stream
// methods take it; never with text or blocks; at most 12,000 characters). A broadcast (<!channel>, <!here>,
// <!everyone>) in a message's text pings the channel, as Slack's would: the message is kept with `pinged: true`.
// A response_url takes 5 posts, as Slack's does; the 6th is answered 404 expired_url.
// chat.startStream / appendStream / stopStream: a message that grows while its
// stream is open; chat.update refuses it until the stream is stopped, and a
// stream with no append for longer than its idle limit is ended, as Slack's
// are. chat.delete removes a message.
import { Gates } from "./gates.mjs";
import { listen, readBody, sendJson } from "./http.mjs";

export const FAKE_SLACK_BOT_TOKEN = "xoxb-fake-single-workspace-token";
export const FAKE_SLACK_SIGNING_SECRET = "fake-slack-signing-secret";
export const FAKE_SLACK_CLIENT_ID = "1111.2222";
export const FAKE_SLACK_CLIENT_SECRET = "fake-slack-client-secret";
/** Slack rejects chat.update (and we keep chat.postMessage) text over this. */
const TEXT_LIMIT = 4000;
/** Slack takes at most this much markdown_text in one call. */
const MARKDOWN_LIMIT = 12_000;
/** The bot's id: the messages it makes carry it, as Slack's do (with its user id). */
const BOT_ID = "BFAKEBOT";
const BROADCAST = /<!(channel|here|everyone)[>|]/;
/** Slack's response_url can be used 5 times. */
const RESPONSE_URL_USES = 5;
/** Slack ends a stream that goes this long without an append (vercel/chat#607: about five minutes)... */
const STREAM_IDLE_MS = 5 * 60_000;
/** ...and removes an assistant thread's status this long after it was set, if no message came (assistant.threads.setStatus). */
const STATUS_EXPIRY_MS = 2 * 60_000;

export async function startSlack({ gates = new Gates() } = {}) {
  const calls = [];
  const tokens = new Set([FAKE_SLACK_BOT_TOKEN]);
  const messages = new Map(); // `${channel}:${ts}` → message
  const oauthCodes = new Map();
  const rateLimits = [];
  const drops = []; // {method, channel}: the next such call's connection is closed unanswered
  const responses = new Map();
  const refuseStreaming = new Set();
  const expireStreams = new Map(); // channel → appends a stream there takes before it expires
  const limits = new Map(); // channel → {streamIdleMs?, statusExpiryMs?}
  const statuses = new Map(); // `${channel}:${thread_ts}` → {status, at}
  const limitOf = (channel, name, fallback) => limits.get(channel)?.[name] ?? fallback;
  /** A message of the bot's in a thread ends the thread's status, as Slack's does. */
  const clearStatus = (channel, threadTs) => statuses.delete(`${channel}:${threadTs}`);
  const files = new Map(); // "/files-pri/<id>/<name>" → {bytes, mimetype}
  const fileFetches = [];
  const revoked = new Set();
  const paced = new Map(); // channel → {spacingMs, lastPostAt}
  // A message's ts is its time in microseconds, as Slack's is, kept unique.
  let lastMicros = 0;
  const nextTs = () => {
    lastMicros = Math.max(lastMicros + 1, Date.now() * 1000);
    return `${Math.floor(lastMicros / 1e6)}.${String(lastMicros % 1e6).padStart(6, "0")}`;
  };
  const directory = { channels: new Map(), users: new Map() };
  let seq = 0;

  return listen(async (req, res) => {
    const url = new URL(req.url, "http://x");
    const raw = req.method === "POST" || req.method === "PUT" ? await readBody(req) : "";

    if (url.pathname === "/_control/calls") {
      const channel = url.searchParams.get("channel");
      const method = url.searchParams.get("method");
      const from = Number(url.searchParams.get("from") ?? 0);
      return sendJson(res, 200, calls.slice(from).filter((c) => (!channel || c.body.channel === channel) && (!method || c.method === method)));
    }
    if (url.pathname === "/_control/rate-limit") {
      rateLimits.push(JSON.parse(raw));
      return sendJson(res, 200, { ok: true });
    }
    if (url.pathname === "/_control/drop") {
      drops.push(JSON.parse(raw));
      return sendJson(res, 200, { ok: true });
    }
    if (url.pathname === "/_control/hold") {
      const { method, channel, textIncludes = "", ms } = JSON.parse(raw);
      gates.holdOnce("slack", (c) => c.method === method && c.body.channel === channel && String(c.body.text ?? c.body.markdown_text ?? "").includes(textIncludes), ms ?? Infinity);
      return sendJson(res, 200, { ok: true });
    }
    const oauth = /^\/_control\/oauth\/(.+)$/.exec(url.pathname);
    if (oauth) {
      oauthCodes.set(decodeURIComponent(oauth[1]), JSON.parse(raw));
      return sendJson(res, 200, { ok: true });
    }
    if (url.pathname === "/_control/messages") {
      const channel = url.searchParams.get("channel");
      return sendJson(res, 200, [...messages.values()].filter((m) => m.channel === channel));
    }
    if (url.pathname === "/_control/refuse-streaming") {
      refuseStreaming.add(JSON.parse(raw).channel);
      return sendJson(res, 200, { ok: true });
    }
    if (url.pathname === "/_control/expire-streams") {
      const { channel, afterAppends } = JSON.parse(raw);
      expireStreams.set(channel, afterAppends);
      return sendJson(res, 200, { ok: true });
    }
    if (url.pathname === "/_control/limits") {
      const { channel, ...set } = JSON.parse(raw);
      limits.set(channel, { ...limits.get(channel), ...set });
      return sendJson(res, 200, { ok: true });
    }
    if (url.pathname === "/_control/status") {
      const channel = url.searchParams.get("channel");
      const set = statuses.get(`${channel}:${url.searchParams.get("thread_ts")}`);
      const shown = set && Date.now() - set.at <= limitOf(channel, "statusExpiryMs", STATUS_EXPIRY_MS);
      return sendJson(res, 200, shown ? set : { status: "", at: set?.at ?? null });
    }
    if (url.pathname === "/_control/directory" && req.method === "PUT") {
      const { channels = {}, users = {} } = JSON.parse(raw);
      for (const [id, name] of Object.entries(channels)) directory.channels.set(id, name);
      for (const [id, user] of Object.entries(users)) directory.users.set(id, user);
      return sendJson(res, 200, { ok: true });
    }
    const responseLog = /^\/_control\/responses\/(.+)$/.exec(url.pathname);
    if (responseLog) return sendJson(res, 200, responses.get(responseLog[1]) ?? []);
    const file = /^\/_control\/files\/(.+)$/.exec(url.pathname);
    if (file && req.method === "PUT") {
      const { base64, mimetype } = JSON.parse(raw);
      files.set(`/files-pri/${file[1]}`, { bytes: Buffer.from(base64, "base64"), mimetype });
      return sendJson(res, 200, { ok: true });
    }
    if (url.pathname === "/_control/file-fetches") return sendJson(res, 200, fileFetches);
    if (url.pathname === "/_control/pace") {
      const { channels, spacingMs = 1000, burst = 1 } = JSON.parse(raw);
      for (const channel of channels) paced.set(channel, { spacingMs, burst, tokens: burst, filledAt: Date.now() });
      return sendJson(res, 200, { ok: true });
    }
    if (url.pathname === "/_control/revoke") {
      revoked.add(JSON.parse(raw).token);
      return sendJson(res, 200, { ok: true });
    }
    if (url.pathname.startsWith("/files-pri/") && req.method === "GET") {
      const bearer = /^Bearer (.+)$/.exec(req.headers.authorization ?? "")?.[1] ?? null;
      const served = files.get(url.pathname);
      const status = !bearer || !tokens.has(bearer) || revoked.has(bearer) ? 403 : served ? 200 : 404;
      fileFetches.push({ path: url.pathname, token: bearer, status, bytes: status === 200 ? served.bytes.length : 0 });
      if (status !== 200) return sendJson(res, status, { ok: false, error: status === 403 ? "not_authed" : "file_not_found" });
      res.writeHead(200, { "content-type": served.mimetype, "content-length": String(served.bytes.length) });
      return res.end(served.bytes);
    }
    const response = /^\/response\/(.+)$/.exec(url.pathname);
    if (response) {
      const used = responses.get(response[1]) ?? [];
      if (used.length >= RESPONSE_URL_USES) return sendJson(res, 404, { ok: false, error: "expired_url" });
      responses.set(response[1], [...used, JSON.parse(raw)]);
      return sendJson(res, 200, { ok: true });
    }

    const api = /^\/api\/([a-zA-Z.0-9]+)$/.exec(url.pathname);
    if (!api || req.method !== "POST") return sendJson(res, 404, { ok: false, error: "unknown_method" });
    const method = api[1];
    const type = (req.headers["content-type"] ?? "").split(";")[0];
    const body = type === "application/json" ? JSON.parse(raw) : Object.fromEntries(new URLSearchParams(raw));
    const token = /^Bearer (.+)$/.exec(req.headers.authorization ?? "")?.[1] ?? null;
    const call = { method, token, body, at: Date.now() };
    calls.push(call);

    const drop = drops.findIndex((d) => d.method === method && d.channel === body.channel);
    if (drop >= 0) {
      drops.splice(drop, 1);
      call.dropped = true;
      return req.socket.destroy();
    }
    const limit = rateLimits.find(
      (l) => l.times > 0 && l.method === method && l.channel === body.channel && (!l.textIncludes || String(body.text ?? body.markdown_text ?? "").includes(l.textIncludes)),
    );
    if (limit) {
      limit.times--;
      call.limited = true;
      return sendJson(res, 429, { ok: false, error: "ratelimited" }, { "retry-after": String(limit.retryAfter) });
    }

    if (method === "oauth.v2.access") {
      const grant = oauthCodes.get(body.code);
      if (body.client_id !== FAKE_SLACK_CLIENT_ID || body.client_secret !== FAKE_SLACK_CLIENT_SECRET) return sendJson(res, 200, { ok: false, error: "invalid_client_id" });
      if (!grant) return sendJson(res, 200, { ok: false, error: "invalid_code" });
      oauthCodes.delete(body.code);
      tokens.add(grant.token);
      return sendJson(res, 200, {
        ok: true,
        access_token: grant.token,
        token_type: "bot",
        bot_user_id: grant.botUserId,
        team: grant.team ? { id: grant.team, name: grant.teamName ?? null } : null,
        enterprise: grant.enterprise ? { id: grant.enterprise, name: grant.enterpriseName ?? null } : null,
        is_enterprise_install: grant.isEnterpriseInstall === true,
      });
    }
    if (!token || !tokens.has(token)) return sendJson(res, 200, { ok: false, error: "invalid_auth" });
    if (revoked.has(token)) return sendJson(res, 200, { ok: false, error: "token_revoked" });
    call.authorized = true;
    if (method === "auth.test") return sendJson(res, 200, { ok: true, user_id: "UFAKEBOT", bot_id: BOT_ID });
    if (method.startsWith("assistant.threads.")) {
      // Assistant threads live in the app's DM; prompts are at most 4 {title, message}.
      const where = typeof body.channel_id === "string" && body.channel_id.startsWith("D") && typeof body.thread_ts === "string";
      const prompts = method !== "assistant.threads.setSuggestedPrompts" || (Array.isArray(body.prompts) && body.prompts.length <= 4 && body.prompts.every((p) => p.title && p.message));
      const known = ["assistant.threads.setStatus", "assistant.threads.setTitle", "assistant.threads.setSuggestedPrompts"].includes(method);
      if (!known) return sendJson(res, 200, { ok: false, error: "unknown_method" });
      if (!where || !prompts) return sendJson(res, 200, { ok: false, error: "invalid_arguments" });
      if (method === "assistant.threads.setStatus") statuses.set(`${body.channel_id}:${body.thread_ts}`, { status: String(body.status ?? ""), at: Date.now() });
      return sendJson(res, 200, { ok: true });
    }
    if (method === "views.publish") {
      const valid = typeof body.user_id === "string" && body.view?.type === "home" && Array.isArray(body.view.blocks) && body.view.blocks.length <= 100;
      return sendJson(res, 200, valid ? { ok: true, view: { id: `VHOME${++seq}`, type: "home" } } : { ok: false, error: "invalid_arguments" });
    }
    // Read methods take form arguments; Slack does not read a JSON body for them.
    if ((method === "conversations.info" || method === "users.info") && type === "application/json") return sendJson(res, 200, { ok: false, error: "invalid_arguments" });
    if (method === "conversations.info") {
      const name = directory.channels.get(body.channel);
      return sendJson(res, 200, name ? { ok: true, channel: { id: body.channel, name, is_channel: true } } : { ok: false, error: "channel_not_found" });
    }
    if (method === "users.info") {
      const user = directory.users.get(body.user);
      if (!user) return sendJson(res, 200, { ok: false, error: "user_not_found" });
      const profile = { display_name: user.display_name ?? "", real_name: user.real_name ?? user.name };
      return sendJson(res, 200, { ok: true, user: { id: body.user, name: user.name, real_name: profile.real_name, profile } });
    }
    if (typeof body.channel !== "string" || body.channel === "") return sendJson(res, 200, { ok: false, error: "channel_not_found" });
    if (typeof body.text === "string" && body.text.length > TEXT_LIMIT) return sendJson(res, 200, { ok: false, error: "msg_too_long" });
    if (typeof body.markdown_text === "string" && body.markdown_text.length > MARKDOWN_LIMIT) return sendJson(res, 200, { ok: false, error: "msg_too_long" });
    // markdown_text is the message: Slack takes it with neither text nor blocks.
    if (body.markdown_text !== undefined && (body.text !== undefined || body.blocks !== undefined)) return sendJson(res, 200, { ok: false, error: "invalid_arguments" });
    /** A message as sent: its markdown is its text; a broadcast in it pings. */
    const written = ({ markdown_text, ...rest }) => {
      const text = markdown_text ?? rest.text ?? "";
      return { ...rest, text, bot_id: BOT_ID, user: "UFAKEBOT", ...(markdown_text !== undefined ? { markdown: true } : {}), ...(BROADCAST.test(text) ? { pinged: true } : {}) };
    };
    if (method === "chat.postMessage") {
      const pace = paced.get(body.channel);
      if (pace) {
        const now = Date.now();
        pace.tokens = Math.min(pace.burst, pace.tokens + (now - pace.filledAt) / pace.spacingMs);
        pace.filledAt = now;
        if (pace.tokens < 1) {
          call.limited = true;
          const wait = (1 - pace.tokens) * pace.spacingMs;
          return sendJson(res, 429, { ok: false, error: "ratelimited" }, { "retry-after": String(Math.ceil(wait / 1000)) });
        }
        pace.tokens -= 1;
      }
      const ts = nextTs();
      messages.set(`${body.channel}:${ts}`, { ...written(body), ts });
      if (body.thread_ts) clearStatus(body.channel, body.thread_ts);
      call.ts = ts;
      // Posted: a harness may hold the answer, as a crash of the sender would lose it.
      await gates.pass("slack", call);
      return sendJson(res, 200, { ok: true, channel: body.channel, ts, message: { text: body.text, thread_ts: body.thread_ts } });
    }
    if (method === "chat.startStream") {
      if (refuseStreaming.has(body.channel)) return sendJson(res, 200, { ok: false, error: "unknown_method" });
      // Outside a DM, Slack wants to know whom the stream is for.
      if (!body.channel.startsWith("D") && (!body.recipient_team_id || !body.recipient_user_id)) return sendJson(res, 200, { ok: false, error: "invalid_arguments" });
      const ts = nextTs();
      const message = { channel: body.channel, thread_ts: body.thread_ts, ts, ...written({ markdown_text: body.markdown_text ?? "" }), streaming: true, appends: 0, appendedAt: Date.now() };
      messages.set(`${body.channel}:${ts}`, message);
      if (body.thread_ts) clearStatus(body.channel, body.thread_ts);
      call.ts = ts;
      // Sent: a harness may hold the answer, as a crash of the sender would lose it.
      await gates.pass("slack", call);
      return sendJson(res, 200, { ok: true, channel: body.channel, ts });
    }
    if (method === "chat.appendStream" || method === "chat.stopStream") {
      const message = messages.get(`${body.channel}:${body.ts}`);
      if (!message) return sendJson(res, 200, { ok: false, error: "message_not_found" });
      if (method === "chat.appendStream" && message.streaming && ++message.appends > (expireStreams.get(body.channel) ?? Infinity)) message.streaming = false;
      // Idle past Slack's limit: the stream has ended, and the message keeps what it showed.
      if (message.streaming && Date.now() - message.appendedAt > limitOf(body.channel, "streamIdleMs", STREAM_IDLE_MS)) {
        message.streaming = false;
        message.expired = true;
      }
      if (!message.streaming) return sendJson(res, 200, { ok: false, error: "message_not_in_streaming_state" });
      message.appendedAt = Date.now();
      Object.assign(message, written({ markdown_text: message.text + (body.markdown_text ?? "") }));
      if (method === "chat.stopStream") message.streaming = false;
      await gates?.pass("slack", call);
      return sendJson(res, 200, { ok: true, channel: body.channel, ts: body.ts });
    }
    if (method === "chat.update") {
      const key = `${body.channel}:${body.ts}`;
      if (!messages.has(key)) return sendJson(res, 200, { ok: false, error: "message_not_found" });
      if (messages.get(key).streaming) return sendJson(res, 200, { ok: false, error: "cant_update_message" });
      // As Slack: new text (or markdown) without blocks removes the message's blocks (a status message's Stop button).
      const { markdown, pinged, blocks, ...before } = messages.get(key);
      messages.set(key, { ...before, ...(body.blocks === undefined && body.text === undefined && body.markdown_text === undefined ? { blocks } : {}), ...written(body) });
      await gates.pass("slack", call);
      return sendJson(res, 200, { ok: true, channel: body.channel, ts: body.ts, text: body.text });
    }
    if (method === "chat.delete") {
      const key = `${body.channel}:${body.ts}`;
      if (!messages.has(key)) return sendJson(res, 200, { ok: false, error: "message_not_found" });
      messages.delete(key);
      return sendJson(res, 200, { ok: true, channel: body.channel, ts: body.ts });
    }
    if (method === "conversations.replies" || method === "conversations.history") {
      // The thread's messages (replies, oldest first) or the channel's top-level ones (history,
      // newest first) after `oldest`; metadata only when asked for.
      // (Timestamps of one length compare as text, exactly: as numbers they would lose the microseconds.)
      const withMetadata = String(body.include_all_metadata) === "true";
      const inclusive = String(body.inclusive) === "true";
      const inPlace = method === "conversations.replies" ? (m) => m.thread_ts === body.ts || m.ts === body.ts : (m) => !m.thread_ts || m.thread_ts === m.ts;
      const thread = [...messages.values()]
        .filter((m) => m.channel === body.channel && inPlace(m))
        .filter((m) => (!body.oldest || m.ts > body.oldest || (inclusive && m.ts === body.oldest)) && (!body.latest || m.ts < body.latest || (inclusive && m.ts === body.latest)))
        .sort((a, b) => (a.ts < b.ts ? -1 : 1) * (method === "conversations.history" ? -1 : 1));
      const limit = Number(body.limit ?? 1000);
      const page = thread.slice(0, limit).map(({ metadata, channel: _, ...m }) => ({ type: "message", ...m, ...(withMetadata && metadata ? { metadata } : {}) }));
      return sendJson(res, 200, { ok: true, messages: page, has_more: thread.length > limit });
    }
    return sendJson(res, 200, { ok: false, error: "unknown_method" });
  });
}

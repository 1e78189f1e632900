// A fake Discord REST API on loopback (under /api/v10): channel messages with
// the bot token, interaction webhooks (follow-ups, @original edits), command
// registration. It rejects
// what Discord rejects (no/wrong bot token, content over 2,000 characters,
// expired interaction tokens, a nonce over 25 characters) and can answer 429
// with retry_after. A create with `nonce` and `enforce_nonce: true` whose nonce
// the bot used within the last few minutes returns that message, as Discord
// does, and makes none. Every call is recorded; the control API is under
// /_control (POST /_control/hold {channel, textIncludes?, ms?}: the next such
// message created in the channel is made but answered only after ms, or never;
// GET /_control/messages?channel= the messages that exist there). The bot's
// typing indicator (POST /channels/{id}/typing) is recorded apart:
// GET /_control/typing?channel=. POST /_control/buckets {channels, limit?,
// resetAfter?, global?}: the bot's message calls in those channels are
// limited as Discord limits them: per route (method and path, per channel) at
// most `limit` calls per `resetAfter` seconds (Discord's 5 per 5 s), every
// answer saying so in X-RateLimit-Limit, -Remaining, -Reset, -Reset-After
// and -Bucket, a call beyond it answered 429 with retry_after; and all of
// them together at most `global` a second (Discord's 50), beyond that a 429
// with `global: true` and X-RateLimit-Global.
// A message whose content says @everyone or
// @here pings the channel unless its allowed_mentions leaves "everyone" out of
// `parse`, as Discord's does: it is kept with `mention_everyone: true`.
// As its CDN: PUT /_control/attachments/<path> {base64, contentType} serves a
// file at GET /attachments/<path>, with no token (Discord's links are signed).
// POST /_control/channels {channels: [{id, type, parent_id?}]}: channels the
// bot can look up (GET /channels/{id}; a thread is type 11 with its parent),
// as the Chat SDK's adapter does to find a thread's parent.
// `answering(call)`, if given, is awaited before every answer of the REST API
// (the typing indicator's and a channel's look-up too): the benchmark delays
// Discord's answers there and times them.
import { Gates } from "./gates.mjs";
import { listen, readBody, sendJson } from "./http.mjs";

export const DISCORD_BOT_TOKEN = "test-discord-bot-token";
export const DISCORD_APPLICATION_ID = "1457469483726668048"; // the recorded fixtures' application
// RFC 8032 §7.1 TEST 1 key: PROTOCOLS §4's frozen Discord vector is signed with it.
export const DISCORD_TEST_SIGNING_KEY = "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60";
export const DISCORD_PUBLIC_KEY = "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a";

const CONTENT_LIMIT = 2000;
const NONCE_LIMIT = 25;
/** How long Discord remembers an enforced nonce ("the past few minutes"). */
const NONCE_WINDOW_MS = 5 * 60_000;

/** Whether a message's body pings everyone: @everyone or @here in it, and allowed_mentions not ruling it out (absent: all parsed). */
const pings = (body) => /@(everyone|here)\b/.test(String(body?.content ?? "")) && (body?.allowed_mentions?.parse ?? ["everyone"]).includes("everyone");

export async function startDiscord({ gates = new Gates(), answering = async () => {} } = {}) {
  /** { method, path, kind: "channel"|"webhook", channelId?, token?, messageId?, status, body } */
  const calls = [];
  const messages = new Map(); // id → message
  const originals = new Map(); // interaction token → message id of @original
  const rateLimits = []; // { match, times, retryAfter }
  const expiredTokens = new Set();
  const nonces = new Map(); // nonce → { id, at } of the bot's message created with it
  const typings = []; // { channelId, authorized, at }
  const channels = new Map(); // id → { id, type, parent_id? }, the channels a bot may look up
  const limited = { channels: new Set(), limit: 5, resetAfterMs: 5000, global: 50, routes: new Map(), globalHits: [] };
  let nextId = 1473200000000000000n;
  const newMessage = (channelId, content) => {
    const message = { id: String(nextId++), channel_id: channelId, content };
    messages.set(message.id, message);
    return message;
  };

  /** "/attachments/<path>" → { bytes, contentType }, as Discord's CDN serves a message's files. */
  const attachments = new Map();
  return listen(async (req, res) => {
    const url = new URL(req.url, "http://x");
    const raw = await readBody(req);

    const attachment = /^\/_control\/attachments\/(.+)$/.exec(url.pathname);
    if (attachment && req.method === "PUT") {
      const { base64, contentType } = JSON.parse(raw);
      attachments.set(`/attachments/${attachment[1]}`, { bytes: Buffer.from(base64, "base64"), contentType });
      return sendJson(res, 200, { ok: true });
    }
    if (url.pathname.startsWith("/attachments/") && req.method === "GET") {
      const served = attachments.get(url.pathname);
      if (!served) return sendJson(res, 404, { message: "404: Not Found", code: 0 });
      res.writeHead(200, { "content-type": served.contentType, "content-length": served.bytes.length });
      return res.end(served.bytes);
    }
    if (url.pathname === "/_control/calls" && req.method === "GET") {
      const channel = url.searchParams.get("channel");
      const token = url.searchParams.get("token");
      const kind = url.searchParams.get("kind");
      return sendJson(res, 200, calls.filter((c) => (channel === null || c.channelId === channel) && (token === null || c.token === token) && (kind === null || c.kind === kind)));
    }
    if (url.pathname === "/_control/typing" && req.method === "GET") {
      const channel = url.searchParams.get("channel");
      return sendJson(res, 200, typings.filter((t) => channel === null || t.channelId === channel));
    }
    const typingRoute = /^\/api\/v10\/channels\/(\d+)\/typing$/.exec(url.pathname);
    if (typingRoute && req.method === "POST") {
      const authorized = req.headers.authorization === `Bot ${DISCORD_BOT_TOKEN}`;
      typings.push({ channelId: typingRoute[1], authorized, at: Date.now() });
      await answering({ method: "POST", path: url.pathname, kind: "typing", channelId: typingRoute[1] });
      if (!authorized) return sendJson(res, 401, { message: "401: Unauthorized", code: 0 });
      res.writeHead(204).end();
      return;
    }
    if (url.pathname === "/_control/channels" && req.method === "POST") {
      for (const channel of JSON.parse(raw).channels) channels.set(channel.id, channel);
      return sendJson(res, 200, { ok: true });
    }
    const channelLookup = /^\/api\/v10\/channels\/(\d+)$/.exec(url.pathname);
    if (channelLookup && req.method === "GET") {
      const call = { method: "GET", path: url.pathname, kind: "lookup", channelId: channelLookup[1], at: Date.now() };
      calls.push(call);
      await answering(call);
      const channel = channels.get(call.channelId);
      call.status = req.headers.authorization !== `Bot ${DISCORD_BOT_TOKEN}` ? 401 : channel ? 200 : 404;
      if (call.status === 401) return sendJson(res, 401, { message: "401: Unauthorized", code: 0 });
      return channel ? sendJson(res, 200, { guild_id: null, ...channel }) : sendJson(res, 404, { message: "Unknown Channel", code: 10003 });
    }
    if (url.pathname === "/_control/rate-limit" && req.method === "POST") {
      const { match, times = 1, retryAfter = 0.5 } = JSON.parse(raw);
      rateLimits.push({ match, times, retryAfter });
      return sendJson(res, 200, { ok: true });
    }
    if (url.pathname === "/_control/buckets" && req.method === "POST") {
      const { channels, limit = 5, resetAfter = 5, global = 50 } = JSON.parse(raw);
      for (const channel of channels) limited.channels.add(channel);
      Object.assign(limited, { limit, resetAfterMs: resetAfter * 1000, global });
      return sendJson(res, 200, { ok: true });
    }
    if (url.pathname === "/_control/hold" && req.method === "POST") {
      const { channel, textIncludes = "", ms } = JSON.parse(raw);
      const match = (c) => c.kind === "channel" && c.method === "POST" && c.channelId === channel && String(c.body?.content ?? "").includes(textIncludes);
      gates.holdOnce("discord", match, ms ?? Infinity);
      return sendJson(res, 200, { ok: true });
    }
    if (url.pathname === "/_control/messages" && req.method === "GET") {
      return sendJson(res, 200, [...messages.values()].filter((m) => m.channel_id === url.searchParams.get("channel")));
    }
    if (url.pathname === "/_control/expire-token" && req.method === "POST") {
      expiredTokens.add(JSON.parse(raw).token);
      return sendJson(res, 200, { ok: true });
    }

    const commandsRoute = /^\/api\/v10\/applications\/(\d+)\/(?:guilds\/(\d+)\/)?commands$/.exec(url.pathname);
    if (commandsRoute && req.method === "PUT") {
      const call = { method: req.method, path: url.pathname, kind: "commands", guildId: commandsRoute[2] ?? null, body: JSON.parse(raw) };
      calls.push(call);
      call.status = req.headers.authorization === `Bot ${DISCORD_BOT_TOKEN}` && commandsRoute[1] === DISCORD_APPLICATION_ID ? 200 : 401;
      if (call.status !== 200) return sendJson(res, call.status, { message: "401: Unauthorized", code: 0 });
      return sendJson(res, 200, call.body.map((command) => ({ ...command, id: String(nextId++), application_id: DISCORD_APPLICATION_ID })));
    }
    const channelRoute = /^\/api\/v10\/channels\/(\d+)\/messages(?:\/(\d+))?$/.exec(url.pathname);
    const webhookRoute = /^\/api\/v10\/webhooks\/(\d+)\/([^/]+)(?:\/messages\/([^/]+))?$/.exec(url.pathname);
    if (!channelRoute && !webhookRoute) return sendJson(res, 404, { message: "404: Not Found", code: 0 });
    const call = channelRoute
      ? { method: req.method, path: url.pathname, kind: "channel", channelId: channelRoute[1], messageId: channelRoute[2], at: Date.now() }
      : { method: req.method, path: url.pathname, kind: "webhook", token: webhookRoute[2], messageId: webhookRoute[3], at: Date.now() };
    call.body = raw ? JSON.parse(raw) : null;
    // When the fake received it (its own clock).
    call.at = Date.now();
    calls.push(call);
    let bucketHeaders = {};
    const answer = async (status, body, headers) => {
      call.status = status;
      call.responseId = body.id;
      await answering(call);
      sendJson(res, status, body, { ...bucketHeaders, ...headers });
    };

    const limit = rateLimits.find((l) => l.times > 0 && url.pathname.includes(l.match));
    if (limit) {
      limit.times--;
      return answer(429, { message: "You are being rate limited.", retry_after: limit.retryAfter, global: false }, {
        "retry-after": String(Math.ceil(limit.retryAfter)),
        "x-ratelimit-scope": "user",
      });
    }
    if (call.kind === "channel" && req.headers.authorization !== `Bot ${DISCORD_BOT_TOKEN}`) {
      return answer(401, { message: "401: Unauthorized", code: 0 });
    }
    if (call.kind === "channel" && limited.channels.has(call.channelId)) {
      const now = Date.now();
      limited.globalHits = limited.globalHits.filter((at) => at > now - 1000);
      if (limited.globalHits.length >= limited.global) {
        const retryAfter = (limited.globalHits[0] + 1000 - now) / 1000;
        call.limited = "global";
        return answer(429, { message: "You are being rate limited.", retry_after: retryAfter, global: true }, {
          "retry-after": String(Math.ceil(retryAfter)),
          "x-ratelimit-global": "true",
          "x-ratelimit-scope": "global",
        });
      }
      const route = `${req.method} /channels/${call.channelId}/messages${call.messageId ? "/{id}" : ""}`;
      let bucket = limited.routes.get(route);
      if (!bucket || now >= bucket.resetAt) limited.routes.set(route, (bucket = { used: 0, resetAt: now + limited.resetAfterMs, hash: `b${limited.routes.size}` }));
      const resetAfter = (bucket.resetAt - now) / 1000;
      const full = bucket.used >= limited.limit;
      if (!full) bucket.used++;
      bucketHeaders = {
        "x-ratelimit-limit": String(limited.limit),
        "x-ratelimit-remaining": String(limited.limit - bucket.used),
        "x-ratelimit-reset": String(bucket.resetAt / 1000),
        "x-ratelimit-reset-after": String(resetAfter),
        "x-ratelimit-bucket": bucket.hash,
      };
      if (full) {
        call.limited = "route";
        return answer(429, { message: "You are being rate limited.", retry_after: resetAfter, global: false }, { "retry-after": String(Math.ceil(resetAfter)), "x-ratelimit-scope": "user" });
      }
      limited.globalHits.push(now);
    }
    if (call.kind === "webhook" && (webhookRoute[1] !== DISCORD_APPLICATION_ID || expiredTokens.has(call.token))) {
      return answer(401, { message: "Invalid Webhook Token", code: 50027 });
    }
    const content = call.body?.content ?? "";
    if (content.length > CONTENT_LIMIT) {
      return answer(400, { message: "Invalid Form Body", code: 50035, errors: { content: { _errors: [{ code: "BASE_TYPE_MAX_LENGTH" }] } } });
    }

    const nonce = call.body?.nonce;
    if (nonce !== undefined && String(nonce).length > NONCE_LIMIT) {
      return answer(400, { message: "Invalid Form Body", code: 50035, errors: { nonce: { _errors: [{ code: "BASE_TYPE_MAX_LENGTH" }] } } });
    }

    if (req.method === "POST" && !call.messageId) {
      // The bot's create with an enforced nonce it used lately: the message it made then.
      const enforced = call.kind === "channel" && nonce !== undefined && call.body.enforce_nonce === true;
      const earlier = enforced ? nonces.get(String(nonce)) : undefined;
      if (earlier && Date.now() - earlier.at < NONCE_WINDOW_MS) {
        call.deduplicated = true;
        return answer(200, messages.get(earlier.id));
      }
      const message = newMessage(call.channelId ?? `webhook:${call.token}`, content);
      if (pings(call.body)) message.mention_everyone = true;
      if (enforced) nonces.set(String(nonce), { id: message.id, at: Date.now() });
      // Made: a test may hold the answer, as a lost connection would.
      await gates.pass("discord", call);
      return answer(200, message);
    }
    if (req.method === "PATCH" && call.messageId) {
      let id = call.messageId;
      if (id === "@original") {
        if (!originals.has(call.token)) originals.set(call.token, newMessage(`webhook:${call.token}`, "").id);
        id = originals.get(call.token);
      }
      const message = messages.get(id);
      if (!message) return answer(404, { message: "Unknown Message", code: 10008 });
      message.content = content;
      if (pings(call.body)) message.mention_everyone = true;
      return answer(200, message);
    }
    return answer(405, { message: "405: Method Not Allowed", code: 0 });
  });
}

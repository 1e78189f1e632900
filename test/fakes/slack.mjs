// A fake Slack Web API on loopback: chat.postMessage, chat.update, auth.test,
// oauth.v2.access, conversations.info, users.info, views.publish, plus
// response_url targets. It checks bearer tokens and Slack's text limit like
// Slack does, and records every call. Control API:
//   GET  /_control/calls?channel=&method=   recorded calls, in order
//   POST /_control/rate-limit              {method, channel, textIncludes?, times, retryAfter}: answer 429 that many times
//   PUT  /_control/oauth/<code>             {team, teamName?, enterprise?, enterpriseName?, token, botUserId}: an OAuth code oauth.v2.access will accept
//   GET  /_control/responses/<id>           what was POSTed to <url>/response/<id>
//   PUT  /_control/directory              {channels?: {C…: name}, users?: {U…: {name, real_name?, display_name?}}}: what conversations.info and users.info know
// A response_url takes 5 posts, as Slack's does; the 6th is answered 404 expired_url.
import { listen, readBody, sendJson } from "./http.mjs";

export const FAKE_SLACK_BOT_TOKEN = "xoxb-fake-single-workspace-token";
export const FAKE_SLACK_SIGNING_SECRET = "fake-slack-signing-secret";
export const FAKE_SLACK_CLIENT_ID = "1111.2222";
export const FAKE_SLACK_CLIENT_SECRET = "fake-slack-client-secret";
/** Slack rejects chat.update (and we keep chat.postMessage) text over this. */
const TEXT_LIMIT = 4000;
/** Slack's response_url can be used 5 times. */
const RESPONSE_URL_USES = 5;

export async function startSlack({ gates } = {}) {
  const calls = [];
  const tokens = new Set([FAKE_SLACK_BOT_TOKEN]);
  const messages = new Map(); // `${channel}:${ts}` → message
  const oauthCodes = new Map();
  const rateLimits = [];
  const responses = new Map();
  const directory = { channels: new Map(), users: new Map() };
  let seq = 0;

  return listen(async (req, res) => {
    const url = new URL(req.url, "http://x");
    const raw = req.method === "POST" || req.method === "PUT" ? await readBody(req) : "";

    if (url.pathname === "/_control/calls") {
      const channel = url.searchParams.get("channel");
      const method = url.searchParams.get("method");
      return sendJson(res, 200, calls.filter((c) => (!channel || c.body.channel === channel) && (!method || c.method === method)));
    }
    if (url.pathname === "/_control/rate-limit") {
      rateLimits.push(JSON.parse(raw));
      return sendJson(res, 200, { ok: true });
    }
    const oauth = /^\/_control\/oauth\/(.+)$/.exec(url.pathname);
    if (oauth) {
      oauthCodes.set(decodeURIComponent(oauth[1]), JSON.parse(raw));
      return sendJson(res, 200, { ok: true });
    }
    if (url.pathname === "/_control/directory" && req.method === "PUT") {
      const { channels = {}, users = {} } = JSON.parse(raw);
      for (const [id, name] of Object.entries(channels)) directory.channels.set(id, name);
      for (const [id, user] of Object.entries(users)) directory.users.set(id, user);
      return sendJson(res, 200, { ok: true });
    }
    const responseLog = /^\/_control\/responses\/(.+)$/.exec(url.pathname);
    if (responseLog) return sendJson(res, 200, responses.get(responseLog[1]) ?? []);
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

    const limit = rateLimits.find(
      (l) => l.times > 0 && l.method === method && l.channel === body.channel && (!l.textIncludes || String(body.text ?? "").includes(l.textIncludes)),
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
    call.authorized = true;
    if (method === "auth.test") return sendJson(res, 200, { ok: true, user_id: "UFAKEBOT" });
    if (method.startsWith("assistant.threads.")) {
      // Assistant threads live in the app's DM; prompts are at most 4 {title, message}.
      const where = typeof body.channel_id === "string" && body.channel_id.startsWith("D") && typeof body.thread_ts === "string";
      const prompts = method !== "assistant.threads.setSuggestedPrompts" || (Array.isArray(body.prompts) && body.prompts.length <= 4 && body.prompts.every((p) => p.title && p.message));
      const known = ["assistant.threads.setStatus", "assistant.threads.setTitle", "assistant.threads.setSuggestedPrompts"].includes(method);
      return sendJson(res, 200, !known ? { ok: false, error: "unknown_method" } : where && prompts ? { ok: true } : { ok: false, error: "invalid_arguments" });
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
    if (method === "chat.postMessage") {
      seq++;
      const ts = `${Math.floor(Date.now() / 1000)}.${String(seq).padStart(6, "0")}`;
      messages.set(`${body.channel}:${ts}`, { ...body, ts });
      call.ts = ts;
      // Posted: a harness may hold the answer, as a crash of the sender would lose it.
      await gates?.pass("slack", call);
      return sendJson(res, 200, { ok: true, channel: body.channel, ts, message: { text: body.text, thread_ts: body.thread_ts } });
    }
    if (method === "chat.update") {
      const key = `${body.channel}:${body.ts}`;
      if (!messages.has(key)) return sendJson(res, 200, { ok: false, error: "message_not_found" });
      messages.set(key, { ...messages.get(key), ...body });
      await gates?.pass("slack", call);
      return sendJson(res, 200, { ok: true, channel: body.channel, ts: body.ts, text: body.text });
    }
    return sendJson(res, 200, { ok: false, error: "unknown_method" });
  });
}

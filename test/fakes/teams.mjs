// A fake Microsoft Teams on loopback, written from the Bot Framework's public
// references (Bot Connector REST API, "Authentication with the Bot Connector
// API", Adaptive Cards' Action.Execute invoke): the Bot Framework's OpenID
// metadata and its JWKS (an RSA key endorsing msteams), the Entra token
// endpoint for client credentials, and the Connector's
// POST /v3/conversations/{id}/activities and PUT …/activities/{activityId}
// under a serviceUrl (<url>/amer/). It is strict where Teams is: a token
// request with another client id, secret, grant or scope is 401/400, a
// Connector call without a token it issued is 401, an activity of an unknown
// type, a message with neither text nor attachments, an Adaptive Card without
// its type and version, a text over 28 KB are 400, an update of an activity
// that does not exist in the conversation is 404. It streams as Teams does in
// a 1:1 chat (only there: elsewhere 403 ContentStreamNotAllowed): a typing
// activity with a streaminfo entity of sequence 1 opens a stream (answered
// with its id), later ones name it with a higher sequence (else 400
// ContentStreamSequenceOrderPreConditionFailed) and carry the text so far, a
// message with streamType "final" ends it; an ended stream takes nothing
// more. It signs the activities a test delivers, as the Bot Framework does
// (POST /_control/sign).
// Every call is recorded; the control API is under /_control:
//   POST /_control/sign {claims?, key?: "published"|"unpublished"}  → {token}
//   GET  /_control/calls?conversation=      the Connector calls (with their status)
//   GET  /_control/messages?conversation=   the messages as they stand
//   GET  /_control/tokens                   how many tokens were issued
//   POST /_control/rate-limit {conversation, times, retryAfter}: the next
//        `times` sends or updates there are 429 with Retry-After
//   POST /_control/hold {conversation, textIncludes}: the next message made
//        or updated there to that text is, and its answer never comes
//   POST /_control/expire-tokens             every token issued so far expires
//   POST /_control/remove {conversation}: the bot was removed from the
//        conversation: every send or update there is 403, as Teams answers
import { createSign, generateKeyPairSync, randomUUID } from "node:crypto";
import { Gates } from "./gates.mjs";
import { listen, readBody, sendJson } from "./http.mjs";

export const TEAMS_APP_ID = "11111111-2222-3333-4444-555555555555";
export const TEAMS_APP_PASSWORD = "fake-teams-client-secret";
export const BOT_FRAMEWORK_ISSUER = "https://api.botframework.com";
const SCOPE = "https://api.botframework.com/.default";
const KID = "fake-bot-framework-key";
/** An activity's size Teams takes (about 28 KB). */
const ACTIVITY_MAX_BYTES = 28_000;

const published = generateKeyPairSync("rsa", { modulusLength: 2048 });
const unpublished = generateKeyPairSync("rsa", { modulusLength: 2048 });
const b64url = (data) => Buffer.from(data).toString("base64url");

/** An RS256 JWT over `claims`, as the Bot Framework signs an activity's token. */
export function signToken(claims, key = "published", kid = KID) {
  const head = b64url(JSON.stringify({ alg: "RS256", kid, typ: "JWT", x5t: kid }));
  const body = b64url(JSON.stringify(claims));
  const signer = createSign("RSA-SHA256");
  signer.update(`${head}.${body}`);
  return `${head}.${body}.${signer.sign((key === "published" ? published : unpublished).privateKey).toString("base64url")}`;
}

export async function startTeams({ gates = new Gates() } = {}) {
  const issued = new Set();
  const expired = new Set();
  const calls = [];
  /** conversation id → [{ id, text, attachments, replyToId }] */
  const conversations = new Map();
  const rateLimits = [];
  const holds = [];
  const removed = new Set();
  const messagesOf = (conversation) => conversations.get(conversation) ?? conversations.set(conversation, []).get(conversation);
  const fail = (status, code, message) => ({ status, body: { error: { code, message } } });
  let base = "";

  function activityError(activity) {
    if (!activity || typeof activity !== "object") return "the body is not an activity";
    if (!["message", "typing"].includes(activity.type)) return `activity type ${activity.type} is not supported here`;
    if (activity.type === "typing") return null;
    if (activity.textFormat !== undefined && !["markdown", "plain", "xml"].includes(activity.textFormat)) return "unknown textFormat";
    const hasText = typeof activity.text === "string" && activity.text.trim() !== "";
    if (!hasText && !(Array.isArray(activity.attachments) && activity.attachments.length > 0)) return "a message needs text or attachments";
    for (const a of activity.attachments ?? []) {
      if (typeof a.contentType !== "string") return "an attachment without contentType";
      if (a.contentType === "application/vnd.microsoft.card.adaptive" && (a.content?.type !== "AdaptiveCard" || typeof a.content?.version !== "string")) return "an Adaptive Card needs type AdaptiveCard and a version";
    }
    if (Buffer.byteLength(JSON.stringify(activity)) > ACTIVITY_MAX_BYTES) return "MessageSizeTooBig";
    return null;
  }

  function limited(conversation) {
    if (removed.has(conversation)) return fail(403, "BotNotInConversationRoster", "The bot is not part of the conversation roster.");
    const limit = rateLimits.find((l) => l.conversation === conversation && l.times > 0);
    if (!limit) return null;
    limit.times--;
    return { status: 429, headers: { "retry-after": String(limit.retryAfter) }, body: { error: { code: "TooManyRequests", message: "Too many requests" } } };
  }

  /** A message was made or updated: a test may hold its answer (a lost connection), and a harness hears of it. */
  async function made(call, conversation, text) {
    const held = holds.findIndex((h) => h.conversation === conversation && text.includes(h.textIncludes));
    if (held >= 0) {
      holds.splice(held, 1);
      call.held = true;
      gates.holdOnce("teams", (c) => c === call);
    }
    await gates.pass("teams", call);
  }

  const shownText = (activity) => activity.text ?? (activity.attachments ?? []).map((a) => (a.content?.body ?? []).map((b) => b.text ?? "").join("\n")).join("\n");

  async function connector(method, conversation, activityId, activity, call) {
    const error = activityError(activity);
    if (error) return fail(error === "MessageSizeTooBig" ? 413 : 400, error === "MessageSizeTooBig" ? error : "BadSyntax", error);
    const messages = messagesOf(conversation);
    if (method === "PUT") {
      const message = messages.find((m) => m.id === activityId);
      if (!message) return fail(404, "ActivityNotFoundInConversation", "The activity was not found in the conversation");
      const rate = limited(conversation);
      if (rate) return rate;
      Object.assign(message, { text: shownText(activity), attachments: activity.attachments ?? null, updated: (message.updated ?? 0) + 1 });
      await made(call, conversation, message.text);
      return { status: 200, body: { id: activityId } };
    }
    const rate = limited(conversation);
    if (rate) return rate;
    const info = (activity.entities ?? []).find((e) => e?.type === "streaminfo");
    if (info) return streamed(conversation, activity, info, call);
    if (activity.type === "typing") return { status: 200, body: {} };
    const id = String(Date.now() * 1000 + Math.floor(Math.random() * 1000));
    const message = { id, text: shownText(activity), attachments: activity.attachments ?? null, replyToId: activity.replyToId ?? null };
    messages.push(message);
    await made(call, conversation, message.text);
    return { status: 201, body: { id } };
  }

  /** A streaming update or a stream's final message. */
  async function streamed(conversation, activity, info, call) {
    // Conversation ids of 1:1 chats start "a:"; Teams streams nowhere else.
    if (!conversation.startsWith("a:")) return fail(403, "ContentStreamNotAllowed", "Content stream is not allowed in this conversation.");
    if (typeof activity.text !== "string" || activity.text === "") return fail(400, "BadArgument", "a streaming activity needs its text");
    const messages = messagesOf(conversation);
    if (info.streamId === undefined) {
      if (activity.type !== "typing" || info.streamType === "final" || info.streamSequence !== 1) return fail(400, "BadArgument", "a stream opens with a typing activity of sequence 1");
      const id = String(Date.now() * 1000 + Math.floor(Math.random() * 1000));
      const message = { id, text: activity.text, attachments: null, replyToId: null, streaming: true, sequence: 1 };
      messages.push(message);
      await made(call, conversation, message.text);
      return { status: 201, body: { id } };
    }
    const message = messages.find((m) => m.id === info.streamId);
    if (!message || !message.streaming) return fail(403, "ContentStreamNotAllowed", "The content stream has ended or does not exist.");
    if (info.streamType === "final") {
      if (activity.type !== "message") return fail(400, "BadArgument", "a stream ends with a message");
      Object.assign(message, { text: activity.text, streaming: false });
      await made(call, conversation, message.text);
      return { status: 201, body: { id: message.id } };
    }
    if (activity.type !== "typing" || !(Number.isInteger(info.streamSequence) && info.streamSequence > message.sequence)) {
      return fail(400, "ContentStreamSequenceOrderPreConditionFailed", "The stream sequence must increase.");
    }
    Object.assign(message, { text: activity.text, sequence: info.streamSequence });
    return { status: 202, body: {} };
  }

  const server = await listen(async (req, res) => {
    const url = new URL(req.url, "http://x");
    const raw = await readBody(req);

    if (url.pathname === "/v1/.well-known/openidconfiguration" && req.method === "GET") {
      return sendJson(res, 200, { issuer: BOT_FRAMEWORK_ISSUER, authorization_endpoint: "https://invalid.botframework.com", jwks_uri: `${base}/v1/.well-known/keys`, id_token_signing_alg_values_supported: ["RS256"], token_endpoint_auth_methods_supported: ["private_key_jwt"] });
    }
    if (url.pathname === "/v1/.well-known/keys" && req.method === "GET") {
      const jwk = published.publicKey.export({ format: "jwk" });
      return sendJson(res, 200, { keys: [{ kty: "RSA", use: "sig", kid: KID, x5t: KID, n: jwk.n, e: jwk.e, endorsements: ["msteams"] }] });
    }
    if (url.pathname === "/botframework.com/oauth2/v2.0/token" && req.method === "POST") {
      if (!/application\/x-www-form-urlencoded/.test(req.headers["content-type"] ?? "")) return sendJson(res, 400, { error: "invalid_request", error_description: "AADSTS900144: The request body must contain the following parameter: 'grant_type'." });
      const form = new URLSearchParams(raw);
      if (form.get("grant_type") !== "client_credentials") return sendJson(res, 400, { error: "unsupported_grant_type" });
      if (form.get("client_id") !== TEAMS_APP_ID || form.get("client_secret") !== TEAMS_APP_PASSWORD) return sendJson(res, 401, { error: "invalid_client", error_description: "AADSTS7000215: Invalid client secret provided." });
      if (form.get("scope") !== SCOPE) return sendJson(res, 400, { error: "invalid_scope" });
      const token = `fake-connector-token-${randomUUID()}`;
      issued.add(token);
      return sendJson(res, 200, { token_type: "Bearer", expires_in: 3599, ext_expires_in: 3599, access_token: token });
    }

    if (url.pathname === "/_control/sign" && req.method === "POST") {
      const { claims = {}, key = "published" } = raw ? JSON.parse(raw) : {};
      const now = Math.floor(Date.now() / 1000);
      const full = { iss: BOT_FRAMEWORK_ISSUER, aud: TEAMS_APP_ID, serviceurl: `${base}/amer/`, nbf: now - 5, exp: now + 3600, ...claims };
      return sendJson(res, 200, { token: signToken(full, key) });
    }
    if (url.pathname === "/_control/calls" && req.method === "GET") {
      const conversation = url.searchParams.get("conversation");
      return sendJson(res, 200, calls.filter((c) => conversation === null || c.conversation === conversation));
    }
    if (url.pathname === "/_control/messages" && req.method === "GET") return sendJson(res, 200, messagesOf(url.searchParams.get("conversation")));
    if (url.pathname === "/_control/tokens" && req.method === "GET") return sendJson(res, 200, { issued: issued.size });
    if (url.pathname === "/_control/rate-limit" && req.method === "POST") {
      const { conversation, times = 1, retryAfter = 1 } = JSON.parse(raw);
      rateLimits.push({ conversation, times, retryAfter });
      return sendJson(res, 200, { ok: true });
    }
    if (url.pathname === "/_control/expire-tokens" && req.method === "POST") {
      for (const token of issued) expired.add(token);
      return sendJson(res, 200, { ok: true });
    }
    if (url.pathname === "/_control/remove" && req.method === "POST") {
      removed.add(JSON.parse(raw).conversation);
      return sendJson(res, 200, { ok: true });
    }
    if (url.pathname === "/_control/hold" && req.method === "POST") {
      const { conversation, textIncludes = "" } = JSON.parse(raw);
      holds.push({ conversation, textIncludes });
      return sendJson(res, 200, { ok: true });
    }

    const route = /^\/amer\/v3\/conversations\/([^/]+)\/activities(?:\/([^/]+))?$/.exec(url.pathname);
    if (!route || !((req.method === "POST" && !route[2]) || (req.method === "PUT" && route[2]))) return sendJson(res, 404, { error: { code: "NotFound", message: "no such route" } });
    let activity;
    try {
      activity = JSON.parse(raw);
    } catch {
      return sendJson(res, 400, { error: { code: "BadSyntax", message: "the body is not JSON" } });
    }
    const conversation = decodeURIComponent(route[1]);
    const call = { method: req.method, conversation, activityId: route[2] ? decodeURIComponent(route[2]) : undefined, activity, at: Date.now() };
    calls.push(call);
    const token = /^Bearer (.+)$/.exec(req.headers.authorization ?? "")?.[1];
    if (!token || !issued.has(token) || expired.has(token)) {
      call.status = 401;
      return sendJson(res, 401, { message: "Authorization has been denied for this request." });
    }
    const { status, body, headers } = await connector(req.method, conversation, call.activityId, activity, call);
    call.status = status;
    sendJson(res, status, body, headers);
    gates.tell("teams-answered", call);
  });
  base = server.url;
  return { ...server, serviceUrl: `${server.url}/amer/` };
}

// A fake Google Chat on loopback, written from Google's public references:
// the Chat API's spaces.messages.create and .patch
// (developers.google.com/workspace/chat/api/reference/rest/v1/spaces.messages),
// the OAuth 2.0 token endpoint's JWT grant for service accounts
// (developers.google.com/identity/protocols/oauth2/service-account, RFC 7523)
// and the certificate URL that publishes the keys Chat signs its requests'
// bearer tokens with (developers.google.com/workspace/chat/verify-requests-from-chat).
// It is strict where Google is: a grant whose assertion is not signed by the
// service account's key, is for another audience, lacks the chat.bot scope or
// lives over an hour is 400 invalid_grant; an API call without a token it
// issued is 401 UNAUTHENTICATED; a messageId not "client-" and lowercase
// letters, digits and hyphens (at most 63) is 400; a create with a messageId
// the space has is 409 ALREADY_EXISTS; a message with neither text nor
// cards, text over 4,096 characters, a thread of another space, an unknown
// messageReplyOption, a card button without an action are 400
// INVALID_ARGUMENT; a patch without updateMask is 400 and of a message that
// does not exist 404 NOT_FOUND. Errors are {error: {code, message, status}}.
// Every call is recorded; the control API is under /_control:
//   GET  /_control/calls?space=      the calls (with their answers' status)
//   GET  /_control/messages?space=   the messages as they stand
//   GET  /_control/grants            how many tokens were granted, and how often the keys were fetched
//   POST /_control/rate-limit {space, times}: the next `times` writes in the
//        space are answered 429 RESOURCE_EXHAUSTED
//   POST /_control/hold {space, textIncludes}: the next message made or edited
//        in the space to that text is, and its answer never comes (a lost answer)
//   POST /_control/remove {space}: the app was removed from the space: every
//        write there is 403 PERMISSION_DENIED
import { createPublicKey, createVerify, generateKeyPairSync, randomUUID } from "node:crypto";
import { Gates } from "./gates.mjs";
import { listen, readBody, sendJson } from "./http.mjs";

export const GCHAT_AUDIENCE = "123456789012";
export const GCHAT_SIGNING_KID = "fake-chat-key-1";
const TEXT_LIMIT = 4096;
const REPLY_OPTIONS = new Set(["MESSAGE_REPLY_OPTION_UNSPECIFIED", "REPLY_MESSAGE_FALLBACK_TO_NEW_THREAD", "REPLY_MESSAGE_OR_FAIL"]);
const UPDATE_FIELDS = new Set(["text", "attachment", "cards", "cardsV2", "accessoryWidgets", "quotedMessageMetadata"]);

const error = (code, status, message) => ({ status: code, body: { error: { code, message, status } } });

/** A key pair: Chat's signing key (its public half on the certificate URL) or the service account's. */
const rsa = () => generateKeyPairSync("rsa", { modulusLength: 2048 });

function verifyAssertion(assertion, publicKey, tokenUrl) {
  const parts = String(assertion ?? "").split(".");
  if (parts.length !== 3) return "assertion is not a JWT";
  const verifier = createVerify("RSA-SHA256");
  verifier.update(`${parts[0]}.${parts[1]}`);
  if (!verifier.verify(publicKey, Buffer.from(parts[2], "base64url"))) return "Invalid JWT Signature.";
  const header = JSON.parse(Buffer.from(parts[0], "base64url").toString());
  const claims = JSON.parse(Buffer.from(parts[1], "base64url").toString());
  if (header.alg !== "RS256") return "Invalid JWT: alg";
  if (claims.aud !== tokenUrl) return "Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable timeframe. Check your iat and exp values";
  const now = Date.now() / 1000;
  if (typeof claims.iat !== "number" || typeof claims.exp !== "number" || claims.exp - claims.iat > 3600 || claims.exp < now || claims.iat > now + 60) return "Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable timeframe";
  if (!String(claims.scope ?? "").split(" ").includes("https://www.googleapis.com/auth/chat.bot")) return "Invalid OAuth scope or ID token audience provided.";
  return { email: claims.iss };
}

function cardError(cardsV2) {
  if (cardsV2 === undefined) return null;
  if (!Array.isArray(cardsV2)) return "cardsV2 must be a list";
  for (const { cardId, card } of cardsV2) {
    if (typeof cardId !== "string" || !card || !Array.isArray(card.sections)) return "each card needs a cardId and sections";
    for (const section of card.sections) {
      for (const widget of section.widgets ?? []) {
        for (const button of widget.buttonList?.buttons ?? []) {
          const action = button.onClick?.action;
          if (typeof button.text !== "string" || !action || typeof action.function !== "string") return "a button needs text and an onClick action";
          if ((action.parameters ?? []).some((p) => typeof p.key !== "string" || typeof p.value !== "string")) return "action parameters are key/value strings";
        }
      }
    }
  }
  return null;
}

/** The text a person reads in a message: its text, else its cards' paragraphs. */
const shownText = (m) => m.text || (m.cardsV2 ?? []).flatMap((c) => c.card.sections.flatMap((s) => (s.widgets ?? []).map((w) => w.textParagraph?.text).filter(Boolean))).join("\n").replace(/&lt;/g, "<").replace(/&gt;/g, ">").replace(/&amp;/g, "&");

export async function startGchat({ gates = new Gates() } = {}) {
  const chatKey = rsa();
  const account = rsa();
  const signingJwk = chatKey.privateKey.export({ format: "jwk" });
  const calls = [];
  const issued = new Set();
  let grants = 0;
  let certFetches = 0;
  /** space → [message] */
  const spaces = new Map();
  const rateLimits = [];
  const holds = [];
  const removed = new Set();
  const messagesOf = (space) => spaces.get(space) ?? spaces.set(space, []).get(space);
  let base;

  async function made(call, space, text) {
    const held = holds.findIndex((h) => h.space === space && text.includes(h.textIncludes));
    if (held >= 0) {
      holds.splice(held, 1);
      call.held = true;
      gates.holdOnce("gchat", (c) => c === call);
    }
    await gates.pass("gchat", call);
  }

  function limited(space) {
    if (removed.has(space)) return error(403, "PERMISSION_DENIED", "The caller does not have permission");
    const limit = rateLimits.find((l) => l.space === space && l.times > 0);
    if (!limit) return null;
    limit.times--;
    return error(429, "RESOURCE_EXHAUSTED", "Resource has been exhausted (e.g. check quota).");
  }

  async function create(space, query, body, call) {
    const messageId = query.get("messageId");
    if (messageId !== null && !/^client-[a-z0-9-]{1,56}$/.test(messageId)) return error(400, "INVALID_ARGUMENT", "Invalid custom ID: must start with client- and contain only lowercase letters, numbers and hyphens, up to 63 characters");
    const option = query.get("messageReplyOption") ?? "MESSAGE_REPLY_OPTION_UNSPECIFIED";
    if (!REPLY_OPTIONS.has(option)) return error(400, "INVALID_ARGUMENT", `Invalid value at 'message_reply_option' (${option})`);
    const hasText = typeof body.text === "string" && body.text !== "";
    if (!hasText && !(Array.isArray(body.cardsV2) && body.cardsV2.length > 0)) return error(400, "INVALID_ARGUMENT", "Message cannot be empty. Discarding.");
    if (hasText && body.text.length > TEXT_LIMIT) return error(400, "INVALID_ARGUMENT", "Message text is too long");
    const cards = cardError(body.cardsV2);
    if (cards) return error(400, "INVALID_ARGUMENT", cards);
    if (body.thread?.name !== undefined && !String(body.thread.name).startsWith(`${space}/threads/`)) return error(400, "INVALID_ARGUMENT", "Thread does not belong to the space");
    const list = messagesOf(space);
    if (messageId !== null && list.some((m) => m.name === `${space}/messages/${messageId}`)) return error(409, "ALREADY_EXISTS", "Message with the requested custom ID already exists");
    const limit = limited(space);
    if (limit) return limit;
    // A reply option keeps the named thread; without one a message starts a thread of its own.
    const replies = option !== "MESSAGE_REPLY_OPTION_UNSPECIFIED" && body.thread?.name;
    const thread = replies ? body.thread.name : `${space}/threads/${randomUUID().slice(0, 11)}`;
    const message = { name: `${space}/messages/${messageId ?? randomUUID()}`, space: { name: space }, thread: { name: thread }, text: body.text ?? "", cardsV2: body.cardsV2 ?? [], fallbackText: body.fallbackText, createTime: new Date().toISOString() };
    list.push(message);
    await made(call, space, shownText(message));
    return { status: 200, body: message };
  }

  async function patch(space, name, query, body, call) {
    const mask = query.get("updateMask");
    if (!mask) return error(400, "INVALID_ARGUMENT", "updateMask is required");
    const fields = mask.split(",");
    if (fields.some((f) => !UPDATE_FIELDS.has(f))) return error(400, "INVALID_ARGUMENT", `Invalid update mask (${mask})`);
    const message = messagesOf(space).find((m) => m.name === name);
    if (!message) return error(404, "NOT_FOUND", "Message not found");
    if (fields.includes("text") && typeof body.text === "string" && body.text.length > TEXT_LIMIT) return error(400, "INVALID_ARGUMENT", "Message text is too long");
    const cards = cardError(body.cardsV2);
    if (cards) return error(400, "INVALID_ARGUMENT", cards);
    const next = { text: fields.includes("text") ? (body.text ?? "") : message.text, cardsV2: fields.includes("cardsV2") ? (body.cardsV2 ?? []) : message.cardsV2 };
    if (next.text === "" && next.cardsV2.length === 0) return error(400, "INVALID_ARGUMENT", "Message cannot be empty.");
    const limit = limited(space);
    if (limit) return limit;
    Object.assign(message, next, { lastUpdateTime: new Date().toISOString() });
    await made(call, space, shownText(message));
    return { status: 200, body: message };
  }

  const server = await listen(async (req, res) => {
    const url = new URL(req.url, "http://x");
    const raw = await readBody(req);
    if (url.pathname === "/certs" && req.method === "GET") {
      certFetches++;
      const { n, e } = chatKey.publicKey.export({ format: "jwk" });
      return sendJson(res, 200, { keys: [{ kty: "RSA", alg: "RS256", use: "sig", kid: GCHAT_SIGNING_KID, n, e }] }, { "cache-control": "public, max-age=3600" });
    }
    if (url.pathname === "/token" && req.method === "POST") {
      const form = new URLSearchParams(raw);
      if (form.get("grant_type") !== "urn:ietf:params:oauth:grant-type:jwt-bearer") return sendJson(res, 400, { error: "unsupported_grant_type", error_description: "Invalid grant_type" });
      const verdict = verifyAssertion(form.get("assertion"), account.publicKey, `${base}/token`);
      if (typeof verdict === "string") return sendJson(res, 400, { error: "invalid_grant", error_description: verdict });
      const token = `ya29.fake-${randomUUID()}`;
      issued.add(token);
      grants++;
      return sendJson(res, 200, { access_token: token, expires_in: 3599, token_type: "Bearer" });
    }
    if (url.pathname === "/_control/calls" && req.method === "GET") {
      const space = url.searchParams.get("space");
      return sendJson(res, 200, calls.filter((c) => space === null || c.space === space));
    }
    if (url.pathname === "/_control/messages" && req.method === "GET") {
      return sendJson(res, 200, messagesOf(url.searchParams.get("space")).map((m) => ({ ...m, shown: shownText(m) })));
    }
    if (url.pathname === "/_control/grants" && req.method === "GET") return sendJson(res, 200, { grants, certFetches });
    if (url.pathname === "/_control/rate-limit" && req.method === "POST") {
      const { space, times = 1 } = JSON.parse(raw);
      rateLimits.push({ space, times });
      return sendJson(res, 200, { ok: true });
    }
    if (url.pathname === "/_control/remove" && req.method === "POST") {
      removed.add(JSON.parse(raw).space);
      return sendJson(res, 200, { ok: true });
    }
    if (url.pathname === "/_control/hold" && req.method === "POST") {
      const { space, textIncludes = "" } = JSON.parse(raw);
      holds.push({ space, textIncludes });
      return sendJson(res, 200, { ok: true });
    }

    const route = /^\/v1\/(spaces\/[A-Za-z0-9_-]+)\/messages(?:\/([A-Za-z0-9_.-]+))?$/.exec(url.pathname);
    if (!route) return sendJson(res, 404, error(404, "NOT_FOUND", "Requested entity was not found.").body);
    const token = /^Bearer (.+)$/.exec(req.headers.authorization ?? "")?.[1];
    if (!token || !issued.has(token)) return sendJson(res, 401, error(401, "UNAUTHENTICATED", "Request had invalid authentication credentials.").body);
    let body;
    try {
      body = raw ? JSON.parse(raw) : {};
    } catch {
      return sendJson(res, 400, error(400, "INVALID_ARGUMENT", "Invalid JSON payload received.").body);
    }
    const [, space, id] = route;
    const call = { method: req.method, space, name: id ? `${space}/messages/${id}` : undefined, query: Object.fromEntries(url.searchParams), body, at: Date.now() };
    calls.push(call);
    let answer;
    if (req.method === "POST" && !id) answer = await create(space, url.searchParams, body, call);
    else if (req.method === "PATCH" && id) answer = await patch(space, call.name, url.searchParams, body, call);
    else answer = error(405, "METHOD_NOT_ALLOWED", "Method not allowed");
    call.status = answer.status;
    sendJson(res, answer.status, answer.body);
    gates.tell("gchat-answered", call);
  });
  base = server.url;
  const serviceAccount = {
    type: "service_account",
    client_email: "antiproton-chat@fake-project.iam.gserviceaccount.com",
    private_key: account.privateKey.export({ format: "pem", type: "pkcs8" }),
    token_uri: `${base}/token`,
  };
  return {
    ...server,
    bindings: {
      GCHAT_API_BASE_URL: base,
      GCHAT_CERTS_URL: `${base}/certs`,
      GCHAT_AUDIENCE,
      GCHAT_SERVICE_ACCOUNT: JSON.stringify(serviceAccount),
      FAKE_GCHAT_URL: base,
      FAKE_GCHAT_SIGNING_KEY: JSON.stringify({ ...signingJwk, kid: GCHAT_SIGNING_KID }),
    },
  };
}

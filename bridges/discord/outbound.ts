// Discord's side of the outbox: posts and edits through the REST API (the
// interaction webhook while its token is valid, else the bot), paced by the
// route buckets' headers, a 429's retry_after and the global 50 a second.
// Each message carries a nonce from its row's key, so a row sent again gets
// back the message Discord already made.
import type { APIMessage, RESTPostAPIChannelMessageJSONBody, RESTRateLimit } from "discord-api-types/v10";
import { hmacHex } from "../../lib/http.ts";
import { openingSince, sendTimeoutMs, type ChatOutbound, type DeliveryResult, type OutboundMessage, type OutboxDelivery, type PaceRule, type ReplyAddress, type Route, type StreamTarget, type TypingSchedule } from "../../runtime/index.ts";
import { clip, splitText } from "../../lib/text.ts";
import { snowflake, targetSchema } from "./address.ts";
import { apiBaseUrl, botToken } from "./config.ts";
import { cardMessage, DISCORD_MESSAGE_LIMIT, type DiscordMessageBody } from "./card.ts";
import { statusText } from "../shared/status.ts";

/** Interaction tokens live 15 minutes; stop using one a minute early. */
const INTERACTION_TOKEN_TTL_MS = 14 * 60_000;
const USER_AGENT = "DiscordBot (https://github.com/antiproton, 0.1.0)";
/** Discord's limit on a nonce's length. */
const NONCE_LENGTH = 25;
/** The bot's global limit is 50 requests a second: its calls go at least this far apart. */
const GLOBAL_SPACING_MS = 20;
const GLOBAL_PACE_KEY = "discord:global";
/** A channel's calls share its route buckets (the channel is their major parameter). */
const channelPaceKey = (channelId: string) => `discord:channel:${channelId}`;
/** Refusals that mean the bot can no longer post in the channel at all (Unknown Channel, Missing Access, Missing Permissions). */
const CHANNEL_GONE_CODES = new Set([10003, 50001, 50013]);

/** Replies arrive split; anything else (a notice quoting a long provider error) is clipped, never refused. */
function render(message: OutboundMessage): DiscordMessageBody {
  switch (message.kind) {
    case "status":
      return { content: clip(statusText(message), DISCORD_MESSAGE_LIMIT) };
    case "card":
      return cardMessage(message.card);
    default:
      return { content: clip(message.text, DISCORD_MESSAGE_LIMIT) };
  }
}

interface Call {
  method: "POST" | "PATCH";
  path: string;
  bot: boolean;
}

/** Messages posted once and then edited in place; their message id is the ref. */
const inPlace = (message: OutboundMessage) => message.kind === "status" || message.kind === "card";

function webhookCall(applicationId: string, token: string, message: OutboundMessage, ref: string | undefined): Call {
  const base = `/webhooks/${applicationId}/${token}`;
  if (message.kind !== "status") return { method: "POST", path: base, bot: false };
  // The first status of an /ask turn replaces the deferred "thinking…" response.
  return { method: "PATCH", path: `${base}/messages/${ref ?? "@original"}`, bot: false };
}

function channelCall(channelId: string, message: OutboundMessage, ref: string | undefined): Call {
  if (inPlace(message) && ref) return { method: "PATCH", path: `/channels/${channelId}/messages/${ref}`, bot: true };
  return { method: "POST", path: `/channels/${channelId}/messages`, bot: true };
}

type CreateBody = DiscordMessageBody & Pick<RESTPostAPIChannelMessageJSONBody, "nonce" | "enforce_nonce">;

/**
 * The same nonce from the same author within a few minutes returns the message
 * already created (enforce_nonce). It must fit in 25 characters, so it is a
 * hash of the row's key. Interaction webhooks take no nonce: only the bot's
 * creates carry one.
 */
async function withNonce(body: DiscordMessageBody, idempotencyKey: string): Promise<CreateBody> {
  const nonce = (await hmacHex("antiproton/discord/nonce", idempotencyKey)).slice(0, NONCE_LENGTH);
  return { ...body, nonce, enforce_nonce: true };
}

/** A call to Discord; without a message (the typing indicator), without a body. */
async function send(env: Env, call: Call, message?: CreateBody): Promise<Response | DeliveryResult> {
  const headers: Record<string, string> = { "content-type": "application/json", "user-agent": USER_AGENT };
  if (call.bot) {
    const token = botToken(env);
    if (!token) return { ok: false, error: "DISCORD_BOT_TOKEN is not configured" };
    headers.authorization = `Bot ${token}`;
  }
  const base = apiBaseUrl(env);
  // allowed_mentions: the agent's text never pings anyone (@everyone included).
  const body = message && JSON.stringify({ ...message, allowed_mentions: { parse: [] } } satisfies RESTPostAPIChannelMessageJSONBody);
  // An awaited fetch to Discord can hang (discord-api-docs#7936): it is given up with the send, and the outbox retries.
  return fetch(`${base}${call.path}`, { method: call.method, headers, body, signal: AbortSignal.timeout(sendTimeoutMs(env)) });
}

/**
 * Discord's answer, with its word on the channel's limits: a spent route
 * bucket holds the channel's calls until it resets, a 429 holds them (or, a
 * global one, every call of the bot) for its retry_after. `channelId` is
 * absent for an interaction's webhook, whose buckets are its own.
 */
async function outcome(res: Response, wantRef: boolean, channelId?: string): Promise<DeliveryResult> {
  const body = (await res.json().catch(() => null)) as Partial<Pick<APIMessage, "id"> & RESTRateLimit & { code: number }> | null;
  const spent = channelId !== undefined && res.headers.get("x-ratelimit-remaining") === "0" ? seconds(res.headers.get("x-ratelimit-reset-after")) : undefined;
  const holds = spent !== undefined ? { holds: [{ key: channelPaceKey(channelId!), ms: spent }] } : {};
  if (res.ok) {
    // The ref names the message in a later PATCH path: only a snowflake is kept.
    return { ...(wantRef && snowflake.safeParse(body?.id).success ? { ok: true, ref: body!.id! } : { ok: true }), ...holds };
  }
  const error = `Discord answered ${res.status}: ${body?.message ?? res.statusText}`;
  if (res.status === 429) {
    const retryAfterMs = seconds(body?.retry_after ?? res.headers.get("retry-after")) ?? 1000;
    const global = body?.global === true || res.headers.get("x-ratelimit-global") === "true";
    const key = global ? GLOBAL_PACE_KEY : channelId !== undefined ? channelPaceKey(channelId) : undefined;
    return { ok: false, error, retryAfterMs, ...(key ? { holds: [{ key, ms: retryAfterMs }] } : {}) };
  }
  if (res.status >= 500) return { ok: false, error, ...holds };
  const gone = channelId !== undefined && (res.status === 401 || res.status === 403 || (body?.code !== undefined && CHANNEL_GONE_CODES.has(body.code)));
  return { ok: false, error, permanent: true, ...(gone ? { unreachable: true } : {}), ...holds };
}

/** Discord's seconds (a float) as whole milliseconds; undefined when it gave none. */
function seconds(value: unknown): number | undefined {
  const n = Number(value ?? NaN);
  return Number.isFinite(n) && n >= 0 ? Math.ceil(n * 1000) : undefined;
}

async function deliver(env: Env, delivery: OutboxDelivery): Promise<DeliveryResult> {
  const target = targetSchema.safeParse(delivery.address.target);
  if (!target.success) return { ok: false, error: "reply address is not a Discord channel (or interaction)", permanent: true };
  const { channelId, applicationId, interactionToken, interactionIssuedAt } = target.data;
  const { message } = delivery;
  // A streamed message whose opening was never answered is not looked for here: the reply is posted.
  const ref = openingSince(delivery.ref) === undefined ? delivery.ref : undefined;
  if (ref !== undefined && !snowflake.safeParse(ref).success) return { ok: false, error: "the message to edit is not a Discord message id", permanent: true };
  // A reply streamed as it was written (streamReply): that message is finished, not a second one posted.
  if (message.kind === "reply" && ref !== undefined) return finishStream(env, channelId, ref, delivery.shown, message.text);
  const body = render(message);
  const wantRef = inPlace(message);
  // Cards are decided long after an interaction token expires, so they are the bot's from the start.
  const tokenValid =
    message.kind !== "card" &&
    applicationId !== undefined &&
    interactionToken !== undefined &&
    interactionIssuedAt !== undefined &&
    Date.now() - interactionIssuedAt < INTERACTION_TOKEN_TTL_MS;
  if (tokenValid) {
    const res = await send(env, webhookCall(applicationId, interactionToken, message, ref), body);
    if (!(res instanceof Response)) return res;
    // 401/404: the token expired early or Discord lost it (discord-api-docs#6851): post as the bot instead.
    if (res.status !== 401 && res.status !== 404) return outcome(res, wantRef);
    await res.body?.cancel();
  }
  const call = channelCall(channelId, message, ref);
  const res = await send(env, call, call.method === "POST" ? await withNonce(body, delivery.idempotencyKey) : body);
  return res instanceof Response ? outcome(res, wantRef, channelId) : res;
}

/** Every call of the bot under the global limit; the bot's calls in a channel under its route buckets. */
function paceOf(delivery: OutboxDelivery): PaceRule[] {
  const target = targetSchema.safeParse(delivery.address.target);
  if (!target.success) return [];
  return [
    { key: channelPaceKey(target.data.channelId), keeper: `discord:${delivery.route.tenant}`, spacingMs: 0 },
    { key: GLOBAL_PACE_KEY, spacingMs: GLOBAL_SPACING_MS },
  ];
}

/**
 * The courier's update of a reply streamed while the model writes it: the bot
 * posts the message, then edits it (the courier paces the edits a second apart).
 */
async function streamReply(env: Env, _route: Route, stream: StreamTarget, text: string): Promise<DeliveryResult> {
  const target = targetSchema.safeParse(stream.address.target);
  if (!target.success) return { ok: false, error: "reply address is not a Discord channel (or interaction)", permanent: true };
  const { channelId } = target.data;
  if (stream.ref === undefined || openingSince(stream.ref) !== undefined) {
    const res = await send(env, { method: "POST", path: `/channels/${channelId}/messages`, bot: true }, { content: text });
    return res instanceof Response ? outcome(res, true, channelId) : res;
  }
  const edited = await edit(env, channelId, stream.ref, text);
  return edited.ok ? { ok: true, ref: stream.ref } : edited;
}

/** The outbox's finish of a streamed reply: its message edited to the whole first part, unless it shows it already. */
function finishStream(env: Env, channelId: string, ref: string, shown: string | undefined, text: string): Promise<DeliveryResult> {
  return shown === text ? Promise.resolve({ ok: true }) : edit(env, channelId, ref, text);
}

async function edit(env: Env, channelId: string, ref: string, text: string): Promise<DeliveryResult> {
  if (!snowflake.safeParse(ref).success) return { ok: false, error: "the message to edit is not a Discord message id", permanent: true };
  const res = await send(env, { method: "PATCH", path: `/channels/${channelId}/messages/${ref}`, bot: true }, { content: text });
  return res instanceof Response ? outcome(res, false, channelId) : res;
}


/**
 * Discord's "is typing…" lasts 10 seconds, or until the bot posts: sent again
 * every 8. The turn's status message says it is working from the start, so
 * the indicator first shows once a turn has run that long: a short turn makes
 * no such call (3 calls a plain turn: its status, the reply, the status's end).
 */
const TYPING: TypingSchedule = { firstMs: 8_000, everyMs: 8_000 };

/** The bot's typing indicator in the conversation's channel: it lasts 10 seconds, or until the bot posts. */
async function typing(env: Env, _route: Route, address: ReplyAddress): Promise<DeliveryResult> {
  const target = targetSchema.safeParse(address.target);
  if (!target.success) return { ok: false, error: "reply address is not a Discord channel", permanent: true };
  const res = await send(env, { method: "POST", path: `/channels/${target.data.channelId}/typing`, bot: true });
  return res instanceof Response ? outcome(res, false) : res;
}

export const discordOutbound: ChatOutbound = {
  platform: "discord",
  split: (text) => splitText(text, DISCORD_MESSAGE_LIMIT),
  deliver,
  paceOf,
  typing,
  typingSchedule: () => TYPING,
  stream: streamReply,
  // DMs have no guild: the bridge routes them to the tenant dm-<user>.
  isDirect: (_by, _address, route) => route.tenant.startsWith("dm-"),
};

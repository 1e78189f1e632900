// Helpers for the Slack bridge tests: requests signed the way Slack signs them
// (computed here independently of the bridge), recorded fixtures replayed into
// fresh channels, and the fake Slack Web API's control API.
import { env } from "cloudflare:workers";
import { expect } from "vitest";
import { providerRequests, script, settled, systemOf, unique, waitFor, worker } from "../../support.ts";

const testEnv = env as unknown as Record<string, string>;
export const AGENT = "assistant";
const encoder = new TextEncoder();

export async function slackSignature(body: string, timestamp: string, secret = testEnv.SLACK_SIGNING_SECRET!): Promise<string> {
  const key = await crypto.subtle.importKey("raw", encoder.encode(secret), { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
  const mac = new Uint8Array(await crypto.subtle.sign("HMAC", key, encoder.encode(`v0:${timestamp}:${body}`)));
  return `v0=${[...mac].map((b) => b.toString(16).padStart(2, "0")).join("")}`;
}

export const nowSeconds = () => String(Math.floor(Date.now() / 1000));

export async function signedPost(path: string, body: string, contentType: string, headers: Record<string, string> = {}): Promise<Response> {
  const timestamp = nowSeconds();
  return worker(path, {
    method: "POST",
    headers: { "content-type": contentType, "x-slack-request-timestamp": timestamp, "x-slack-signature": await slackSignature(body, timestamp), ...headers },
    body,
  });
}

export function postEvent(envelope: unknown, headers: Record<string, string> = {}): Promise<Response> {
  return signedPost("/slack/events", JSON.stringify(envelope), "application/json", headers);
}

export function postCommand(fields: Record<string, string>): Promise<Response> {
  return signedPost("/slack/commands", new URLSearchParams(fields).toString(), "application/x-www-form-urlencoded");
}

export function postInteraction(payload: unknown): Promise<Response> {
  return signedPost("/slack/interactivity", new URLSearchParams({ payload: JSON.stringify(payload) }).toString(), "application/x-www-form-urlencoded");
}

/** A unique Slack-style id (channels, teams, timestamps stay distinct across tests sharing the fake). */
export function slackId(prefix: string): string {
  return `${prefix}${crypto.randomUUID().replaceAll("-", "").slice(0, 10).toUpperCase()}`;
}

let tsSeq = 0;
export function newTs(): string {
  return `${Math.floor(Date.now() / 1000)}.${String(++tsSeq).padStart(6, "0")}`;
}

type Json = Record<string, unknown>;

/** A recorded envelope replayed into another channel/team/thread, with event fields overridden. */
export function replay(envelope: Json, overrides: { team?: string; channel?: string; event?: Json }): Json {
  const copy = structuredClone(envelope) as Json & { event: Json; authorizations?: Json[] };
  if (overrides.team) {
    copy.team_id = overrides.team;
    for (const auth of copy.authorizations ?? []) if ("team_id" in auth) auth.team_id = overrides.team;
  }
  if (overrides.channel) copy.event.channel = overrides.channel;
  Object.assign(copy.event, overrides.event ?? {});
  return copy;
}

/**
 * A `message` envelope as Slack sends it for a person's channel message. A
 * message that starts a thread mentions the agent (as it must, to be answered)
 * unless `mention` is false.
 */
export function messageEnvelope(o: {
  team: string;
  channel: string;
  ts: string;
  text: string;
  thread_ts?: string;
  user?: string;
  type?: string;
  event_id?: string;
  mention?: boolean;
  event?: Json;
}): Json {
  const mention = o.mention ?? !o.thread_ts;
  return {
    token: "verification-token",
    team_id: o.team,
    api_app_id: "AFAKEAPP",
    type: "event_callback",
    event_id: o.event_id ?? slackId("Ev"),
    event_time: Math.floor(Date.now() / 1000),
    authorizations: [{ enterprise_id: null, team_id: o.team, user_id: "UFAKEBOT", is_bot: true, is_enterprise_install: false }],
    event: {
      type: o.type ?? "message",
      user: o.user ?? "UPERSON1",
      text: mention ? `<@UFAKEBOT> ${o.text}` : o.text,
      ts: o.ts,
      channel: o.channel,
      event_ts: o.ts,
      channel_type: "channel",
      ...(o.thread_ts ? { thread_ts: o.thread_ts } : {}),
      ...o.event,
    },
  };
}

export const conversationOf = (team: string, channel: string, threadTs: string) => `${team}:${channel}:${threadTs}`;

export interface SlackCall {
  method: string;
  token: string | null;
  body: {
    channel?: string;
    text?: string;
    markdown_text?: string;
    thread_ts?: string;
    ts?: string;
    blocks?: { type: string; elements?: { action_id?: string; value?: string }[] }[];
    metadata?: { event_type: string; event_payload: Record<string, unknown> };
    include_all_metadata?: string;
    oldest?: string;
  };
  ts?: string;
  /** When the fake received it (its own clock). */
  at: number;
  limited?: boolean;
  authorized?: boolean;
  /** Its connection was closed with no answer, the call not made (the fake's /_control/drop). */
  dropped?: boolean;
}

export async function slackCalls(channel: string, method?: string): Promise<SlackCall[]> {
  const query = new URLSearchParams({ channel, ...(method ? { method } : {}) });
  return (await fetch(`${testEnv.FAKE_SLACK_URL}/_control/calls?${query}`)).json();
}

/** An approval card: a message with the approve button. */
export const isCard = (c: SlackCall) => c.body.blocks?.some((b) => b.elements?.some((e) => e.action_id === "antiproton_approve")) === true;
export const buttons = (c: SlackCall) => c.body.blocks!.flatMap((b) => b.elements ?? []).filter((e) => e.action_id);

/** A person's click on a card's button, signed as Slack signs it. */
export function slackClick(team: string, channel: string, threadTs: string, cardTs: string, value: string, user: string, responseId: string, actionTs = newTs()) {
  return postInteraction({
    type: "block_actions",
    user: { id: user, team_id: team, name: user.toLowerCase() },
    team: { id: team },
    container: { type: "message", channel_id: channel, message_ts: cardTs, thread_ts: threadTs },
    channel: { id: channel },
    message: { ts: cardTs, thread_ts: threadTs },
    response_url: responseUrl(responseId),
    actions: [{ action_id: "antiproton_approve", block_id: "card", value, action_ts: actionTs }],
  });
}

/** A post of a turn's status message (its blocks open with the state's context line). */
const isStatusPost = (c: SlackCall) => c.method === "chat.postMessage" && c.body.blocks?.[0]?.type === "context" && !c.limited && c.authorized === true;

/**
 * Replies and notices, in the order they appeared: postMessage calls without
 * blocks that Slack accepted, and a status message edited into the turn's
 * answer (its chat.update, with the ts, thread and metadata of the post
 * it took the place of, as the thread shows it).
 */
export async function threadMessages(channel: string): Promise<SlackCall[]> {
  const calls = await slackCalls(channel);
  const statuses = new Map(calls.filter(isStatusPost).map((c) => [c.ts, c]));
  return calls.flatMap((c) => {
    if (c.method === "chat.postMessage") return !c.body.blocks && !c.limited && c.authorized ? [c] : [];
    const status = c.method === "chat.update" && c.body.markdown_text !== undefined && !c.limited ? statuses.get(c.body.ts) : undefined;
    return status && c.authorized ? [{ ...c, ts: status.ts, body: { ...c.body, thread_ts: status.body.thread_ts, metadata: status.body.metadata } }] : [];
  });
}

/** A turn's end may follow a reply the model writes over seconds (7 s in stream-pushback's), and a loaded machine takes three times that: within the test's own 30 s. */
const STATUS_FINAL_WAIT_MS = 25_000;

/**
 * Waits until the turn's status message was finalised (the last thing a turn
 * delivers): its final state, or for "Done." its edit into a one-message
 * answer (the answer takes the status message's place).
 */
export function statusFinal(channel: string, state: "Done." | "Stopped." | "Failed."): Promise<SlackCall> {
  return waitFor(`status "${state}" in ${channel}`, async () => {
    const calls = await slackCalls(channel);
    const final = calls.find((c) => c.body.blocks && c.body.text?.endsWith(state) && !c.limited);
    if (final || state !== "Done.") return final;
    const statuses = new Set(calls.filter(isStatusPost).map((c) => c.ts));
    return calls.find((c) => c.method === "chat.update" && c.body.markdown_text !== undefined && !c.limited && statuses.has(c.body.ts));
  }, STATUS_FINAL_WAIT_MS);
}

export async function rateLimit(rule: { method: string; channel: string; textIncludes?: string; times: number; retryAfter: number }): Promise<void> {
  await fetch(`${testEnv.FAKE_SLACK_URL}/_control/rate-limit`, { method: "POST", body: JSON.stringify(rule) });
}

/** The next such call is made (a post is posted) but answered only after `ms`, or never. */
export async function holdSlack(rule: { method: string; channel: string; textIncludes?: string; ms?: number }): Promise<void> {
  await fetch(`${testEnv.FAKE_SLACK_URL}/_control/hold`, { method: "POST", body: JSON.stringify(rule) });
}

export async function grantOauthCode(code: string, grant: { team?: string; teamName?: string; enterprise?: string; enterpriseName?: string; isEnterpriseInstall?: boolean; token: string; botUserId: string }): Promise<void> {
  await fetch(`${testEnv.FAKE_SLACK_URL}/_control/oauth/${code}`, { method: "PUT", body: JSON.stringify(grant) });
}

export async function responsesTo(id: string): Promise<{ text: string; response_type: string }[]> {
  return (await fetch(`${testEnv.FAKE_SLACK_URL}/_control/responses/${id}`)).json();
}

export const responseUrl = (id: string) => `${testEnv.FAKE_SLACK_URL}/response/${id}`;
export const fakeSlackEnv = testEnv;

/** Runs the browser side of an install: /slack/install, then Slack's redirect to the callback with `code`. */
export async function install(code: string): Promise<Response> {
  const start = await worker("/slack/install", { redirect: "manual" });
  expect(start.status).toBe(302);
  const location = new URL(start.headers.get("location")!);
  const cookie = start.headers.get("set-cookie")!.split(";")[0]!;
  return worker(`/slack/oauth/callback?code=${code}&state=${encodeURIComponent(location.searchParams.get("state")!)}`, { headers: { cookie } });
}

/** Installs the app in a workspace through OAuth; returns the bot token Slack granted it. */
export async function installWorkspace(grant: { team?: string; teamName?: string; enterprise?: string; enterpriseName?: string; isEnterpriseInstall?: boolean }): Promise<string> {
  const token = `xoxb-${slackId("")}`;
  const code = slackId("code");
  await grantOauthCode(code, { ...grant, token, botUserId: "UFAKEBOT" });
  const res = await install(code);
  expect(res.status).toBe(200);
  return token;
}

/** Where a person writes to the agent: their DM (channel D…), or a channel. */
export type SlackPlace = { dm: string; user: string } | { channel: string; user: string };

/**
 * A Slack message that starts a conversation: in a new thread of a DM (the
 * DM's top-level messages are one running conversation) or a new channel
 * thread (mentioning the agent); returns its conversation id once settled.
 */
export async function slackConversation(team: string, where: SlackPlace, text: string): Promise<string> {
  const ts = newTs();
  const thread = "dm" in where ? newTs() : ts;
  const envelope =
    "dm" in where
      ? messageEnvelope({ team, channel: where.dm, ts, thread_ts: thread, text, user: where.user, mention: false, event: { channel_type: "im" } })
      : messageEnvelope({ team, channel: where.channel, ts, text, user: where.user });
  expect((await postEvent(envelope)).status).toBe(200);
  const conversation = conversationOf(team, "dm" in where ? where.dm : where.channel, thread);
  await settled(team, AGENT, conversation);
  return conversation;
}

/** The system prompt of a new Slack conversation's first request. */
export async function firstPrompt(team: string, where: SlackPlace): Promise<string> {
  const s = unique("look");
  await script(s, [{ text: "Hello." }]);
  await slackConversation(team, where, `[s:${s}] hello`);
  return systemOf((await providerRequests(s))[0]!);
}

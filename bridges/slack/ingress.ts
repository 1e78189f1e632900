// The normalised ingress: Events API envelopes, slash commands and
// block_actions, already verified (by Slack's signature over HTTP, or by the
// forward signature from the Socket Mode connector), become ChatEvents.
// Every answer is ready once the event is durably accepted: the model is never awaited.
import * as z from "zod";
import { parseDecisionValue } from "../../approvals/index.ts";
import { HttpError, isHttpsOrLoopback } from "../../lib/http.ts";
import { agentStub, fetchFiles, rememberPerson, submitEvent, trustedUrl, type ChatUser, type ReplyAddress, type Route, type SharedFile } from "../../runtime/index.ts";
import { conversationId } from "../shared/ids.ts";
import { isAssistantThread, setSuggestedPrompts, setTitle } from "./assistant.ts";
import { apiBaseUrl, assistantEnabled, routeFor } from "./config.ts";
import { botTokenFor, withdrawInstallation } from "./installations.ts";
import { publishHome } from "./home.ts";
import { withNames } from "./names.ts";
import { parseStopValue, STOP_ACTION } from "./status.ts";

/** A JSON answer for Slack (or for the connector to ack with). */
export type SlackAnswer = Record<string, unknown>;
/** Work that may finish after the answer (posting to a response_url). */
export type Defer = (work: Promise<unknown>) => void;

/** Message subtypes written by people; every other subtype (edits, deletions, joins, bots) is not a turn. */
const PERSON_SUBTYPES = new Set(["file_share", "thread_broadcast"]);

function invalid(what: string, error: z.ZodError): HttpError {
  return new HttpError(400, `malformed ${what}: ${z.prettifyError(error)}`);
}

/** The tenant is the workspace, or the organisation for an org-wide (Enterprise Grid) install. */
function tenantOf(teamId: string | null | undefined, enterpriseId: string | null | undefined, orgInstall: boolean): string {
  const tenant = orgInstall && enterpriseId ? enterpriseId : teamId;
  if (!tenant) throw new HttpError(400, "the request names no workspace (team_id)");
  return tenant;
}

/** A DM's channel id (an `im` channel) starts with D. */
const isDm = (channel: string) => channel.startsWith("D");

/**
 * Where a message belongs and where its answer goes. A DM's top-level messages
 * are one running conversation answered in the DM itself (`<tenant>:<D…>:dm`);
 * a thread, in a DM or a channel, is its own conversation answered in the thread.
 */
function placeOf(env: Env, tenant: string, channel: string, threadTs: string | null, ts: string): { conversation: string; replyTo: ReplyAddress } {
  if (!threadTs && isDm(channel)) {
    return { conversation: conversationId(`${tenant}:${channel}:dm`, "the workspace and DM channel"), replyTo: { platform: "slack", target: { channel } } };
  }
  const thread = threadTs ?? ts;
  const conversation = conversationId(`${tenant}:${channel}:${thread}`, "the workspace, channel and thread ts");
  // With the assistant view, the app's DM threads are assistant threads (bridges/slack/assistant.ts).
  const assistant = threadTs !== null && isDm(channel) && assistantEnabled(env);
  return { conversation, replyTo: { platform: "slack", target: { channel, thread_ts: thread, ...(assistant ? { assistant } : {}) } } };
}

/** Slack's user ids (U…, W…): they become part of event ids and approvers' names. */
const userId = z.string().regex(/^[A-Za-z0-9_]{1,64}$/, "a Slack user id (letters, digits, _)");
/** Slack's message timestamps ("1531420618.000200"): they name messages and threads. */
const messageTs = z.string().regex(/^\d{1,12}\.\d{1,9}$/, "a Slack message ts (digits.digits)");

const slackUser = (id: string, team?: string | null): ChatUser => ({ platform: "slack", id, ...(team ? { team } : {}) });

// ---- Events API -------------------------------------------------------------

const authorization = z.object({
  team_id: z.string().nullish(),
  enterprise_id: z.string().nullish(),
  user_id: z.string().nullish(),
  is_enterprise_install: z.boolean().nullish(),
});

const envelopeSchema = z.discriminatedUnion("type", [
  z.object({ type: z.literal("url_verification"), challenge: z.string() }),
  z.object({
    type: z.literal("event_callback"),
    team_id: z.string().nullish(),
    enterprise_id: z.string().nullish(),
    context_team_id: z.string().nullish(),
    authorizations: z.array(authorization).nullish(),
    event: z.looseObject({ type: z.string() }),
  }),
  z.looseObject({ type: z.literal("app_rate_limited") }),
]);

const messageSchema = z.object({
  type: z.enum(["message", "app_mention"]),
  subtype: z.string().nullish(),
  user: userId.nullish(),
  /** The person's workspace (an organisation's install hears several). */
  user_team: z.string().nullish(),
  team: z.string().nullish(),
  bot_id: z.string().nullish(),
  text: z.string().nullish(),
  channel: z.string(),
  ts: messageTs,
  thread_ts: messageTs.nullish(),
  channel_type: z.string().nullish(),
  files: z
    .array(z.looseObject({ name: z.string().nullish(), mimetype: z.string().nullish(), size: z.number().nullish(), url_private: z.string().nullish() }))
    .nullish(),
});

type CallbackEnvelope = Extract<z.infer<typeof envelopeSchema>, { type: "event_callback" }>;

/** The envelope's workspace, as its first authorization (else its own fields) names it. */
function tenantOfEnvelope(envelope: CallbackEnvelope): string {
  const auth = envelope.authorizations?.[0];
  return tenantOf(auth?.team_id ?? envelope.team_id ?? envelope.context_team_id, auth?.enterprise_id ?? envelope.enterprise_id, auth?.is_enterprise_install === true);
}

const homeOpenedSchema = z.object({ type: z.literal("app_home_opened"), user: userId, tab: z.string().nullish() });

export async function handleEvent(env: Env, body: unknown, defer: Defer): Promise<SlackAnswer> {
  const parsed = envelopeSchema.safeParse(body);
  if (!parsed.success) throw invalid("Events API envelope", parsed.error);
  const envelope = parsed.data;
  if (envelope.type === "url_verification") return { challenge: envelope.challenge };
  if (envelope.type !== "event_callback") return { ok: true };
  if (envelope.event.type === "app_uninstalled" || envelope.event.type === "tokens_revoked") return withdraw(env, envelope);
  if (envelope.event.type === "app_home_opened") return homeOpened(env, envelope, defer);
  if (envelope.event.type === "assistant_thread_started" || envelope.event.type === "assistant_thread_context_changed") return assistantThread(env, envelope, defer);
  if (envelope.event.type !== "message" && envelope.event.type !== "app_mention") return { ok: true };

  const message = messageSchema.safeParse(envelope.event);
  if (!message.success) throw invalid(`${envelope.event.type} event`, message.error);
  const event = message.data;
  const auth = envelope.authorizations?.[0];
  const botUserId = auth?.user_id ?? null;
  if (event.subtype && !PERSON_SUBTYPES.has(event.subtype)) return { ok: true };
  if (event.bot_id || !event.user || event.user === botUserId) return { ok: true }; // never answer a bot, itself included

  const tenant = tenantOfEnvelope(envelope);
  const route = routeFor(env, tenant);
  const { conversation, replyTo } = placeOf(env, tenant, event.channel, event.thread_ts ?? null, event.ts);
  if (!(await addressed(env, route, event, botUserId, conversation))) return { ok: true };
  // A workspace the app is not installed in is not answered: no turn is paid for a reply nobody could see.
  const token = await botTokenFor(env, tenant);
  if (!token) {
    console.warn(`slack: an event from workspace ${tenant} was dropped: the app is not installed there (no bot token)`);
    return { ok: true };
  }
  const text = await withNames(env, tenant, messageText(event.text ?? "", botUserId));
  const attachments = event.files?.length ? await fetchFiles(event.files.map((file) => sharedFile(env, file)), { platform: "Slack", headers: { authorization: `Bearer ${token}` } }) : [];
  if (text === "" && attachments.length === 0) return { ok: true };
  const submitted = await submitEvent(env, route, {
    // One id per Slack message: retries, duplicates with new event ids, and the
    // app_mention + message pair of one mention all collapse into one event.
    id: `slack:${event.channel}:${event.ts}`,
    kind: "message",
    conversation,
    user: slackUser(event.user, event.user_team ?? event.team),
    replyTo,
    text,
    ...(attachments.length ? { attachments } : {}),
  });
  if (submitted.first && isAssistantThread(replyTo.target)) defer(setTitle(env, tenant, event.channel, event.thread_ts!, text));
  return { ok: true };
}

const assistantThreadSchema = z.object({
  type: z.enum(["assistant_thread_started", "assistant_thread_context_changed"]),
  assistant_thread: z.object({
    user_id: userId,
    channel_id: z.string(),
    thread_ts: messageTs,
    context: z.looseObject({ channel_id: z.string().nullish() }).nullish(),
  }),
  event_ts: messageTs,
});

/**
 * An assistant thread opened (its suggested prompts are set, after the answer),
 * or the person looking at another channel: the channel is a note the model
 * reads at its next step.
 */
async function assistantThread(env: Env, envelope: CallbackEnvelope, defer: Defer): Promise<SlackAnswer> {
  const parsed = assistantThreadSchema.safeParse(envelope.event);
  if (!parsed.success) throw invalid(`${envelope.event.type} event`, parsed.error);
  const { type, assistant_thread: thread, event_ts } = parsed.data;
  const tenant = tenantOfEnvelope(envelope);
  if (type === "assistant_thread_started") defer(setSuggestedPrompts(env, tenant, thread.channel_id, thread.thread_ts));
  const looking = thread.context?.channel_id;
  if (!looking || !/^[CG][A-Z0-9]{2,30}$/.test(looking)) return { ok: true };
  const { conversation, replyTo } = placeOf(env, tenant, thread.channel_id, thread.thread_ts, thread.thread_ts);
  await submitEvent(env, routeFor(env, tenant), {
    id: `slack:context:${thread.channel_id}:${thread.thread_ts}:${event_ts}`,
    kind: "note",
    conversation,
    user: slackUser(thread.user_id),
    replyTo,
    text: `The person is looking at the channel ${await withNames(env, tenant, `<#${looking}>`)} in Slack.`,
  });
  return { ok: true };
}

/** The Home tab opened (not the Messages tab): it is published for that person, after the answer. */
function homeOpened(env: Env, envelope: CallbackEnvelope, defer: Defer): SlackAnswer {
  const opened = homeOpenedSchema.safeParse(envelope.event);
  if (!opened.success) throw invalid("app_home_opened event", opened.error);
  if (opened.data.tab !== "home") return { ok: true };
  defer(publishHome(env, tenantOfEnvelope(envelope), opened.data.user));
  return { ok: true };
}

type Callback = Extract<z.infer<typeof envelopeSchema>, { type: "event_callback" }>;

/** `tokens_revoked` names the users whose tokens went: only bot tokens are ours (user tokens are never stored). */
const revokedSchema = z.object({ tokens: z.object({ bot: z.array(z.string()).nullish(), oauth: z.array(z.string()).nullish() }) });

/**
 * `app_uninstalled`, or `tokens_revoked` for the bot: the workspace's token is
 * deleted and the replies still waiting for it fail at once, rather than
 * being tried with a token Slack no longer takes. Installing again resumes.
 */
async function withdraw(env: Env, envelope: Callback): Promise<SlackAnswer> {
  let botUsers: string[] | null = null;
  if (envelope.event.type === "tokens_revoked") {
    const revoked = revokedSchema.safeParse(envelope.event);
    if (!revoked.success) throw invalid("tokens_revoked event", revoked.error);
    botUsers = revoked.data.tokens.bot ?? [];
    if (botUsers.length === 0) return { ok: true };
  }
  const tenant = tenantOfEnvelope(envelope);
  const route = routeFor(env, tenant);
  if (!(await withdrawInstallation(env, tenant, botUsers))) return { ok: true };
  const why = envelope.event.type === "app_uninstalled" ? "the app was uninstalled" : "its bot token was revoked";
  const dropped = await agentStub(env, route).dropDeliveries(route, "slack", `undeliverable: ${why} in Slack workspace ${tenant}`);
  console.warn(`slack: ${why} in workspace ${tenant}; its token is deleted and ${dropped} unsent messages failed`);
  return { ok: true };
}

/**
 * In a DM every message is for the agent. In a channel the agent answers when
 * mentioned, and then follows that thread without being mentioned again.
 */
async function addressed(env: Env, route: Route, event: z.infer<typeof messageSchema>, botUserId: string | null, conversation: string): Promise<boolean> {
  if (event.type === "app_mention" || event.channel_type === "im") return true;
  if (botUserId && (event.text ?? "").includes(`<@${botUserId}>`)) return true;
  if (!event.thread_ts) return false;
  // The listing, not the conversation itself: it answers without carrying the transcript.
  return (await agentStub(env, route).conversations(route, conversation)).some((c) => c.id === conversation);
}

/** The person's words without the mention that addressed the bot. */
function messageText(text: string, botUserId: string | null): string {
  return botUserId ? text.replaceAll(`<@${botUserId}>`, "").trim() : text.trim();
}

// ---- slash commands ---------------------------------------------------------------

const commandSchema = z.object({
  team_id: z.string().min(1),
  enterprise_id: z.string().optional(),
  is_enterprise_install: z.string().optional(),
  channel_id: z.string().min(1),
  user_id: userId,
  /** The command as the person typed it: Slack's app settings name it, not this deployment. */
  command: z.string().regex(/^\/[^\s/]{1,32}$/, "a slash command name such as /agent"),
  text: z.string().default(""),
  trigger_id: z.string().optional(),
});

const ephemeral = (text: string): SlackAnswer => ({ response_type: "ephemeral", text });

function helpText(cmd: string): string {
  return [
    `*${cmd}* talks to the agent in this channel. Mention it or message it to start; reply in the thread to steer it.`,
    `• \`${cmd} stop\`: stop the running turns in this channel (in a thread, use the Stop button)`,
    `• \`${cmd} status\`: state and usage of this channel's latest conversation`,
    `• \`${cmd} compact\`: summarise this channel's latest conversation to free its context`,
    `• \`${cmd} help\`: this help`,
  ].join("\n");
}

/** Slash commands run in a channel, never in a thread, so they act on the channel's conversations. */
export async function handleCommand(env: Env, form: URLSearchParams): Promise<SlackAnswer> {
  if (form.get("ssl_check") === "1") return {};
  const parsed = commandSchema.safeParse(Object.fromEntries(form));
  if (!parsed.success) throw invalid("slash command", parsed.error);
  const command = parsed.data;
  const tenant = tenantOf(command.team_id, command.enterprise_id, command.is_enterprise_install === "true");
  const route = routeFor(env, tenant);
  const word = command.text.trim().split(/\s+/)[0]!.toLowerCase();
  if (word !== "stop" && word !== "status" && word !== "compact") return ephemeral(helpText(command.command));

  const conversations = await agentStub(env, route).conversations(route, `${tenant}:${command.channel_id}:`);
  const invocation = command.trigger_id ?? crypto.randomUUID();
  const user = slackUser(command.user_id, command.team_id);
  if (word === "stop") {
    const running = conversations.filter((c) => c.status === "running" || c.status === "waiting_model");
    const results = await Promise.all(
      running.map((c) => submitEvent(env, route, { id: `slack:command:${invocation}:${c.id}`, kind: "interrupt", conversation: c.id, user })),
    );
    const stopped = results.filter((r) => r.accepted).length;
    return ephemeral(stopped === 0 ? "Nothing is running in this channel." : `Stopped ${stopped} running turn${stopped === 1 ? "" : "s"} in this channel.`);
  }
  const latest = conversations[0];
  if (!latest) return ephemeral("There is no conversation with the agent in this channel yet.");
  const result = await submitEvent(env, route, { id: `slack:command:${invocation}`, kind: "command", command: word, conversation: latest.id, user });
  return ephemeral(result.notice ?? `Done (${result.status}).`);
}

// ---- interactivity -------------------------------------------------------------------

const blockActionsSchema = z.object({
  type: z.literal("block_actions"),
  user: z.object({ id: userId, team_id: z.string().nullish(), name: z.string().nullish(), username: z.string().nullish() }),
  team: z.object({ id: z.string() }).nullish(),
  enterprise: z.object({ id: z.string() }).nullish(),
  is_enterprise_install: z.boolean().nullish(),
  channel: z.object({ id: z.string() }).nullish(),
  container: z.looseObject({ channel_id: z.string().nullish(), message_ts: z.string().nullish(), thread_ts: z.string().nullish() }).nullish(),
  message: z.looseObject({ ts: z.string().nullish(), thread_ts: z.string().nullish() }).nullish(),
  response_url: z.string().nullish(),
  actions: z.array(z.object({ action_id: z.string(), value: z.string().nullish(), action_ts: messageTs.nullish() })).min(1),
});

export async function handleInteraction(env: Env, payload: unknown, defer: Defer): Promise<SlackAnswer> {
  if (typeof payload !== "object" || payload === null || (payload as { type?: unknown }).type !== "block_actions") return {};
  const parsed = blockActionsSchema.safeParse(payload);
  if (!parsed.success) throw invalid("block_actions payload", parsed.error);
  const click = parsed.data;
  const action = click.actions[0]!;
  const tenant = tenantOf(click.team?.id ?? click.user.team_id, click.enterprise?.id, click.is_enterprise_install === true);
  const route = routeFor(env, tenant);
  const user = slackUser(click.user.id, click.user.team_id ?? click.team?.id);
  // The console shows `slack:<team>:<user>` by the name a click carries (message events carry none), kept after the answer.
  const name = click.user.name ?? click.user.username;
  const team = click.user.team_id ?? click.team?.id;
  if (name && team) defer(rememberPerson(env, { identity: `slack:${team}:${click.user.id}`, name }).catch(() => undefined));
  const clickId = `slack:action:${click.user.id}:${action.action_ts ?? crypto.randomUUID()}`;

  let notice: string | undefined;
  if (action.action_id === STOP_ACTION) {
    const target = parseStopValue(action.value ?? undefined);
    if (!target || !sameRoute(target, route)) throw new HttpError(400, "the Stop button names another workspace or agent");
    notice = (await submitEvent(env, route, { id: clickId, kind: "interrupt", conversation: target.conversation, user })).notice;
  } else {
    // Approval card buttons carry a decision value bound to its tenant and agent; other buttons are not ours.
    const decision = parseDecisionValue(action.value ?? "");
    if (!decision) return {};
    const channel = click.container?.channel_id ?? click.channel?.id;
    const threadTs = click.container?.thread_ts ?? click.message?.thread_ts ?? null;
    const messageTs = click.container?.message_ts ?? click.message?.ts;
    if (!channel || !messageTs) throw new HttpError(400, "the clicked message names no channel and thread");
    const result = await submitEvent(env, route, {
      id: clickId,
      kind: "decision",
      holdId: decision.holdId,
      approve: decision.approve,
      boundTo: { tenant: decision.tenant, agent: decision.agent },
      conversation: placeOf(env, tenant, channel, threadTs, messageTs).conversation,
      user,
    });
    notice = result.notice;
  }
  if (notice && click.response_url && URL.canParse(click.response_url) && isHttpsOrLoopback(new URL(click.response_url))) {
    defer(tellClicker(click.response_url, notice));
  }
  return {};
}

function sameRoute(target: { tenant: string; agent: string }, route: Route): boolean {
  return target.tenant === route.tenant && target.agent === route.agent;
}

/**
 * An ephemeral answer to the person who clicked, through the interaction's
 * response_url. It runs after the answer to Slack, so it never throws: a failed
 * post is logged once (without the URL, which lets anyone post in the channel).
 */
async function tellClicker(responseUrl: string, text: string): Promise<void> {
  try {
    const res = await fetch(responseUrl, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ response_type: "ephemeral", replace_original: false, text }),
    });
    await res.body?.cancel();
    if (!res.ok) console.error(`Slack response_url post failed: HTTP ${res.status}`);
  } catch (err) {
    console.error(`Slack response_url post failed: ${err instanceof Error ? err.message : String(err)}`);
  }
}

/** A Slack file object as the shared fetch reads it: the bot token goes only to Slack's file host (or where SLACK_API_BASE_URL points). */
function sharedFile(env: Env, file: { name?: string | null; mimetype?: string | null; size?: number | null; url_private?: string | null }): SharedFile {
  return { name: file.name || "unnamed file", mimeType: file.mimetype || "application/octet-stream", bytes: file.size ?? 0, url: trustedUrl(file.url_private, ["files.slack.com"], apiBaseUrl(env)) };
}

// A reply streamed into a Slack thread while the model writes it: Slack's own
// stream (chat.startStream, chat.appendStream, chat.stopStream) where the
// workspace has it, else one message posted and edited (chat.update), the
// courier pacing the edits (runtime/courier/reply-stream.ts). The ref says which:
// "stream:<ts>" for a stream still open, "<ts>" for a plain message. The
// outbox's reply row finishes the message (finishStream): it stops the stream,
// or edits the message to the whole first part of the reply, or does nothing
// when the message already shows it. Every way sends the reply as Slack's own
// Markdown (slackMarkdown), so it renders the same whichever way it went.
import * as z from "zod";
import { openingSince, putTenantRecord, tenantRecord, type DeliveryResult, type Route, type StreamTarget } from "../../runtime/index.ts";
import { botTokenFor } from "./installations.ts";
import { slackMarkdown } from "./mrkdwn.ts";
import { callSlack, type SlackResult } from "./web-api.ts";

const STREAM_REF = "stream:";
/** Where a workspace's refusal of chat.startStream is remembered: the kind of its tenant object's record (and the control plane's namespace a release before kept it under). */
const REFUSALS = "slack-stream-refusals";
const refusal = z.object({ until: z.number(), error: z.string() });
/** How long a refusal is believed: streaming is then tried again (the workspace may have it by then). */
export const STREAM_REFUSAL_MEMORY_MS = 60 * 60_000;

/** The ts of a message whose Slack stream is still open, or undefined for a plain message. */
const openStream = (ref: string) => (ref.startsWith(STREAM_REF) ? ref.slice(STREAM_REF.length) : undefined);

/** A thread, or a DM's own view (no thread_ts) as a DM's running conversation is answered. */
export type Thread = { channel: string; thread_ts?: string };

function threadOf(target: StreamTarget["address"]["target"]): Thread | null {
  const { channel, thread_ts } = target;
  if (typeof channel !== "string") return null;
  if (thread_ts === undefined) return { channel };
  return typeof thread_ts === "string" ? { channel, thread_ts } : null;
}

/** What Slack is sent to bring a message showing `shown` to `text` (the rendering of a start is the start of the rendering). */
const added = (shown: string, text: string) => slackMarkdown(text).slice(slackMarkdown(shown).length);

/** The courier's update: opens the message, appends to its stream, or edits it to show `text`. */
export async function streamReply(env: Env, route: Route, target: StreamTarget, text: string): Promise<DeliveryResult> {
  const thread = threadOf(target.address.target);
  if (!thread) return { ok: false, error: "reply address has no Slack channel (and thread)", permanent: true };
  const token = await botTokenFor(env, route.tenant);
  if (!token) return { ok: false, error: `no bot token for workspace ${route.tenant}`, permanent: true };
  if (!target.ref) return open(env, token, route, thread, target, text);
  const since = openingSince(target.ref);
  if (since !== undefined) {
    // An earlier run asked for the message and its answer was lost: the message it made (if any) is taken over.
    const found = await findOpened(env, token, thread, since);
    if (!found.ok) return found;
    return found.ts === undefined ? open(env, token, route, thread, target, text) : edit(env, token, thread.channel, `${STREAM_REF}${found.ts}`, text);
  }
  const streaming = openStream(target.ref);
  if (streaming && target.shown !== undefined && text.startsWith(target.shown)) {
    // A stream Slack ended (it expires) answers message_not_in_streaming_state, permanent: the courier stops
    // updating, the message keeps what it shows, and the outbox's finish posts the rest.
    const appended = await callSlack(env, "chat.appendStream", token, { channel: thread.channel, ts: streaming, markdown_text: added(target.shown, text) });
    return appended.ok ? { ok: true, ref: target.ref } : appended;
  }
  // What the stream shows is not a start of `text` (a run after a crash): it is stopped and the message edited.
  return edit(env, token, thread.channel, target.ref, text);
}

/**
 * The outbox's finish of a streamed message with the reply's first part. A
 * stream Slack will not stop (it expired, or it refuses) keeps what it shows,
 * and the rest is posted as a new message in the thread (`postRest`, with the
 * outbox row's own read-back), never dropped. `uncertain`: an earlier attempt
 * may have stopped it already, so the message is read back first.
 */
export async function finishStream(
  env: Env,
  token: string,
  thread: Thread,
  finish: { ref: string; shown: string | undefined; text: string; uncertain: boolean },
  postRest: (markdown: string) => Promise<DeliveryResult>,
): Promise<DeliveryResult> {
  const { ref, shown, text } = finish;
  const since = openingSince(ref);
  if (since !== undefined) {
    const found = await findOpened(env, token, thread, since);
    if (!found.ok) return found;
    if (found.ts === undefined) return postRest(slackMarkdown(text));
    const edited = await edit(env, token, thread.channel, `${STREAM_REF}${found.ts}`, text);
    return edited.ok ? { ok: true } : edited;
  }
  const streaming = openStream(ref);
  if (streaming && shown !== undefined && text.startsWith(shown)) {
    const rest = added(shown, text);
    const stopped = await callSlack(env, "chat.stopStream", token, { channel: thread.channel, ts: streaming, ...(rest ? { markdown_text: rest } : {}) });
    if (stopped.ok || !stopped.permanent) return stopped.ok ? { ok: true } : stopped;
    if (finish.uncertain) {
      const showing = await messageText(env, token, thread, streaming);
      if (!showing.ok) return showing;
      if (showing.text === slackMarkdown(text)) return { ok: true }; // the earlier stop went through
    }
    console.warn(`slack: the stream of message ${streaming} could not be stopped (${stopped.error}); the rest of the reply is posted as a new message`);
    return rest.trim() === "" ? { ok: true } : postRest(rest);
  }
  if (!streaming && shown === text) return { ok: true };
  const edited = await edit(env, token, thread.channel, ref, text);
  return edited.ok ? { ok: true } : edited;
}

/** Slack's clock is not the Worker's: the thread is read from a minute before the opening was asked for. */
const CLOCK_SKEW_MS = 60_000;

/**
 * The message an opening whose answer was lost made, if Slack made it: the
 * bot's newest message in the thread since then that carries no outbox row's
 * metadata (every post does; a stream cannot). Undefined ts: none was made.
 */
async function findOpened(env: Env, token: string, thread: Thread, since: number): Promise<{ ok: true; ts?: string } | Extract<SlackResult, { ok: false }>> {
  const me = await callSlack(env, "auth.test", token, {});
  if (!me.ok) return me;
  const query = new URLSearchParams({
    channel: thread.channel,
    ...(thread.thread_ts === undefined ? {} : { ts: thread.thread_ts }),
    oldest: ((since - CLOCK_SKEW_MS) / 1000).toFixed(6),
    include_all_metadata: "true",
    limit: "100",
  });
  const read = await callSlack(env, thread.thread_ts === undefined ? "conversations.history" : "conversations.replies", token, query);
  if (!read.ok) return read;
  type Read = { ts?: unknown; user?: unknown; bot_id?: unknown; metadata?: unknown } | null;
  const messages = Array.isArray(read.data.messages) ? (read.data.messages as Read[]) : [];
  const mine = (m: Read) => m !== null && ((me.data.bot_id !== undefined && m.bot_id === me.data.bot_id) || m.user === me.data.user_id);
  // The newest such message: an earlier job's stream may be there too, but none is made after the lost one before it is found.
  const candidates = messages.filter((m) => mine(m) && typeof m?.ts === "string" && m.ts !== thread.thread_ts && m.metadata === undefined);
  const opened = candidates.sort((a, b) => (String(a!.ts) < String(b!.ts) ? 1 : -1))[0];
  return typeof opened?.ts === "string" ? { ok: true, ts: opened.ts } : { ok: true };
}

/** What a message of the thread shows now, as conversations.replies reads it. */
async function messageText(env: Env, token: string, thread: Thread, ts: string): Promise<{ ok: true; text: string } | Extract<SlackResult, { ok: false }>> {
  const query = new URLSearchParams({ channel: thread.channel, ts: thread.thread_ts ?? ts, oldest: ts, latest: ts, inclusive: "true", limit: "1" });
  const read = await callSlack(env, "conversations.replies", token, query);
  if (!read.ok) return read;
  const messages = Array.isArray(read.data.messages) ? (read.data.messages as { ts?: unknown; text?: unknown }[]) : [];
  const text = messages.find((m) => m.ts === ts)?.text;
  return { ok: true, text: typeof text === "string" ? text : "" };
}

async function open(env: Env, token: string, route: Route, thread: Thread, target: StreamTarget, text: string): Promise<DeliveryResult> {
  if (!(await refusesStreaming(env, route.tenant))) {
    // Outside a DM Slack wants the person the stream is for, and their own workspace.
    const team = target.recipient?.team ?? (route.tenant.startsWith("T") ? route.tenant : undefined);
    const recipient = target.recipient?.platform === "slack" && team ? { recipient_team_id: team, recipient_user_id: target.recipient.id } : {};
    const started = await callSlack(env, "chat.startStream", token, { ...thread, markdown_text: slackMarkdown(text), ...recipient });
    if (started.ok) return { ok: true, ref: `${STREAM_REF}${String(started.data.ts)}` };
    if (!started.permanent) return started;
    await rememberRefusal(env, route.tenant, started.error);
  }
  // The workspace has no streaming (or refuses it here): one message, edited as the reply grows.
  const posted = await callSlack(env, "chat.postMessage", token, { ...thread, markdown_text: slackMarkdown(text), unfurl_links: false });
  return posted.ok ? { ok: true, ref: String(posted.data.ts) } : posted;
}

async function refusesStreaming(env: Env, tenant: string): Promise<boolean> {
  const remembered = refusal.safeParse(await tenantRecord(env, tenant, REFUSALS));
  return remembered.success && remembered.data.until > Date.now();
}

async function rememberRefusal(env: Env, tenant: string, error: string): Promise<void> {
  const until = Date.now() + STREAM_REFUSAL_MEMORY_MS;
  await putTenantRecord(env, tenant, REFUSALS, { until, error } satisfies z.infer<typeof refusal>);
  console.warn(`slack: workspace ${tenant} refused streaming (${error}); replies are posted and edited until ${new Date(until).toISOString()}`);
}

/** Stops the stream first if it is open; the message is then a plain one, edited to show `text`. */
async function edit(env: Env, token: string, channel: string, ref: string, text: string): Promise<DeliveryResult> {
  const streaming = openStream(ref);
  if (streaming) {
    const stopped = await callSlack(env, "chat.stopStream", token, { channel, ts: streaming });
    // A stream already stopped (an earlier attempt's answer was lost, or Slack expired it) is a plain message to edit.
    if (!stopped.ok && !stopped.error.endsWith("message_not_in_streaming_state")) return stopped;
  }
  const ts = streaming ?? ref;
  const updated = await callSlack(env, "chat.update", token, { channel, ts, markdown_text: slackMarkdown(text) });
  return updated.ok ? { ok: true, ref: ts } : updated;
}

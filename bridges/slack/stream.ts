// A reply streamed into a Slack thread while the model writes it: Slack's own
// stream (chat.startStream, chat.appendStream, chat.stopStream) where the
// workspace has it, else one message posted and edited (chat.update), the
// courier pacing the edits (runtime/courier/reply-stream.ts). The ref says which:
// "stream:<ts>" for a stream still open, "<ts>" for a plain message. The
// outbox's reply row finishes the message (finishStream): it stops the stream,
// or edits the message to the whole first part of the reply, or does nothing
// when the message already shows it.
import type { DeliveryResult, Route, StreamTarget } from "../../runtime/index.ts";
import { clip } from "../../lib/text.ts";
import { botTokenFor } from "./installations.ts";
import { SLACK_TEXT_LIMIT, toMrkdwn } from "./mrkdwn.ts";
import { callSlack, type SlackResult } from "./web-api.ts";

const STREAM_REF = "stream:";

/** The ts of a message whose Slack stream is still open, or undefined for a plain message. */
const openStream = (ref: string) => (ref.startsWith(STREAM_REF) ? ref.slice(STREAM_REF.length) : undefined);

/** A thread, or a DM's own view (no thread_ts) as a DM's running conversation is answered. */
type Thread = { channel: string; thread_ts?: string };

function threadOf(target: StreamTarget["address"]["target"]): Thread | null {
  const { channel, thread_ts } = target;
  if (typeof channel !== "string") return null;
  if (thread_ts === undefined) return { channel };
  return typeof thread_ts === "string" ? { channel, thread_ts } : null;
}

/** The courier's update: opens the message, appends to its stream, or edits it to show `text`. */
export async function streamReply(env: Env, route: Route, target: StreamTarget, text: string): Promise<DeliveryResult> {
  const thread = threadOf(target.address.target);
  if (!thread) return { ok: false, error: "reply address has no Slack channel (and thread)", permanent: true };
  const token = await botTokenFor(env, route.tenant);
  if (!token) return { ok: false, error: `no bot token for workspace ${route.tenant}`, permanent: true };
  if (!target.ref) return open(env, token, route, thread, target, text);
  const streaming = openStream(target.ref);
  if (streaming && target.shown !== undefined && text.startsWith(target.shown)) {
    const appended = await callSlack(env, "chat.appendStream", token, { channel: thread.channel, ts: streaming, markdown_text: text.slice(target.shown.length) });
    return appended.ok ? { ok: true, ref: target.ref } : appended;
  }
  // What the stream shows is not a start of `text` (a run after a crash): it is stopped and the message edited.
  return edit(env, token, thread.channel, target.ref, text);
}

/** The outbox's finish of a streamed message with the reply's first part. */
export async function finishStream(env: Env, token: string, channel: string, ref: string, shown: string | undefined, text: string): Promise<DeliveryResult> {
  const streaming = openStream(ref);
  if (streaming && shown !== undefined && text.startsWith(shown)) {
    const rest = text.slice(shown.length);
    const stopped = await stop(env, token, channel, streaming, rest);
    return stopped.ok ? { ok: true } : stopped;
  }
  if (!streaming && shown === text) return { ok: true };
  const edited = await edit(env, token, channel, ref, text);
  return edited.ok ? { ok: true } : edited;
}

async function open(env: Env, token: string, route: Route, thread: Thread, target: StreamTarget, text: string): Promise<DeliveryResult> {
  // Outside a DM Slack wants the person the stream is for; a workspace (not an org) names their team.
  const recipient =
    target.recipient?.platform === "slack" && route.tenant.startsWith("T") ? { recipient_team_id: route.tenant, recipient_user_id: target.recipient.id } : {};
  const started = await callSlack(env, "chat.startStream", token, { ...thread, markdown_text: text, ...recipient });
  if (started.ok) return { ok: true, ref: `${STREAM_REF}${String(started.data.ts)}` };
  if (!started.permanent) return started;
  // The workspace has no streaming (or refuses it here): one message, edited as the reply grows.
  const posted = await callSlack(env, "chat.postMessage", token, { ...thread, text: mrkdwn(text), unfurl_links: false });
  return posted.ok ? { ok: true, ref: String(posted.data.ts) } : posted;
}

/** Stops the stream first if it is open; the message is then a plain one, edited to show `text`. */
async function edit(env: Env, token: string, channel: string, ref: string, text: string): Promise<DeliveryResult> {
  const streaming = openStream(ref);
  if (streaming) {
    const stopped = await stop(env, token, channel, streaming, "");
    if (!stopped.ok) return stopped;
  }
  const ts = streaming ?? ref;
  const updated = await callSlack(env, "chat.update", token, { channel, ts, text: mrkdwn(text) });
  return updated.ok ? { ok: true, ref: ts } : updated;
}

/** A stream already stopped (an earlier attempt's answer was lost) counts as stopped. */
async function stop(env: Env, token: string, channel: string, ts: string, rest: string): Promise<SlackResult> {
  const stopped = await callSlack(env, "chat.stopStream", token, { channel, ts, ...(rest ? { markdown_text: rest } : {}) });
  return !stopped.ok && stopped.error.endsWith("message_not_in_streaming_state") ? { ok: true, data: {} } : stopped;
}

const mrkdwn = (text: string) => clip(toMrkdwn(text), SLACK_TEXT_LIMIT);

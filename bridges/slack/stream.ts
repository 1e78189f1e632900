// A reply streamed into a Slack thread while the model writes it: Slack's own
// stream (chat.startStream, chat.appendStream, chat.stopStream) where the
// workspace has it, else one message posted and edited (chat.update), the
// courier pacing the edits (runtime/courier/reply-stream.ts). Slack ends a
// stream that goes about five minutes without an append (a model thinking,
// or writing a long tool call): the message keeps what it shows and the rest
// of the reply rolls onto a new stream in the thread, so the person keeps
// reading it as it is written. The ref names the messages (Chain below). The
// outbox's reply row finishes the last one (finishStream): it stops the
// stream, or edits the message to its part of the reply, or does nothing when
// it already shows it. Every way sends the reply as Slack's own Markdown
// (slackMarkdown), so it renders the same whichever way it went.
import * as z from "zod";
import { openingSince, putTenantRecord, tenantRecord, type DeliveryResult, type Route, type StreamTarget } from "../../runtime/index.ts";
import { botTokenFor } from "./installations.ts";
import { slackMarkdown } from "./mrkdwn.ts";
import { callSlack, type SlackResult } from "./web-api.ts";

/** Where a workspace's refusal of chat.startStream is remembered: the kind of its tenant object's record (and the control plane's namespace a release before kept it under). */
const REFUSALS = "slack-stream-refusals";
const refusal = z.object({ until: z.number(), error: z.string() });
/** How long a refusal is believed: streaming is then tried again (the workspace may have it by then). */
export const STREAM_REFUSAL_MEMORY_MS = 60 * 60_000;

/**
 * One message of a streamed reply: its ts, the character of the reply it
 * shows it from (`from`: those before are in the messages before it), and
 * whether its stream is open, it is a plain message, or it is being opened
 * (`rolling`: asked for at `ts`, in ms, its answer not in yet).
 */
type Part = { ts: string; from: number; state: "stream" | "plain" | "rolling" };
/** A reply's messages, oldest first. */
type Chain = Part[];

const PART = /^(stream:|rolling:)?(\d+(?:\.\d+)?)(?:\+(\d+))?$/;

/** A ref: its parts `|` apart, each `[stream:|rolling:]<ts>[+<from>]` (`stream:<ts>` and `<ts>`, a single message, as before chains). */
function chainOf(ref: string): Chain | null {
  const parts = ref.split("|").map((text) => PART.exec(text));
  if (parts.some((m) => m === null)) return null;
  return parts.map((m) => ({ ts: m![2]!, from: Number(m![3] ?? 0), state: m![1] === "stream:" ? "stream" : m![1] === "rolling:" ? "rolling" : "plain" }));
}

function refOf(chain: Chain): string {
  return chain.map(({ ts, from, state }) => `${state === "plain" ? "" : `${state}:`}${ts}${from > 0 ? `+${from}` : ""}`).join("|");
}

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
/** What a message showing the reply from its `from`-th character shows of `text`. */
const partOf = (text: string, from: number) => added(text.slice(0, from), text);

const notStreaming = (result: SlackResult) => !result.ok && result.error.endsWith("message_not_in_streaming_state");

/** The courier's update: opens the message, appends to its stream (rolling onto a new one once Slack ended it), or edits it to show `text`. */
export async function streamReply(env: Env, route: Route, target: StreamTarget, text: string, record: (ref: string) => Promise<void>): Promise<DeliveryResult> {
  const thread = threadOf(target.address.target);
  if (!thread) return { ok: false, error: "reply address has no Slack channel (and thread)", permanent: true };
  const token = await botTokenFor(env, route.tenant);
  if (!token) return { ok: false, error: `no bot token for workspace ${route.tenant}`, permanent: true };
  const opener = (before: Chain, from: number) => (markdown: string) => open(env, token, route, thread, target, before, from, markdown);
  if (!target.ref) return opener([], 0)(slackMarkdown(text));
  const since = openingSince(target.ref);
  if (since !== undefined) {
    // An earlier run asked for the message and its answer was lost: the message it made (if any) is taken over.
    const found = await findOpened(env, token, thread, since);
    if (!found.ok) return found;
    return found.ts === undefined ? opener([], 0)(slackMarkdown(text)) : edit(env, token, thread.channel, [], { ts: found.ts, from: 0, state: "stream" }, text);
  }
  const chain = chainOf(target.ref);
  if (!chain) return { ok: false, error: `not a Slack message: ${target.ref}`, permanent: true };
  const { shown } = target;
  // What the messages show is not a start of `text` (a run after a crash): the reply starts again in the first.
  if (shown === undefined || !text.startsWith(shown)) return restart(env, token, thread, chain, text);
  const before = chain.slice(0, -1);
  const last = chain.at(-1)!;
  if (last.state === "rolling") return rollOn(env, token, thread, before, last, text, opener(before, last.from));
  if (last.state === "plain") return edit(env, token, thread.channel, before, last, text);
  const appended = await callSlack(env, "chat.appendStream", token, { channel: thread.channel, ts: last.ts, markdown_text: added(shown, text) });
  if (appended.ok) return { ok: true, ref: target.ref };
  if (!notStreaming(appended)) return appended;
  // Slack ended the stream (it idled past its limit): the message keeps what it shows, and the rest goes on a new
  // one. The object hears of it first: should the answer be lost, the next attempt looks for that message.
  const kept = [...before, { ...last, state: "plain" as const }];
  await record(refOf([...kept, { ts: String(Date.now()), from: shown.length, state: "rolling" }]));
  console.warn(`slack: the stream of message ${last.ts} ended (${appended.error}); the rest of the reply goes on a new message`);
  return opener(kept, shown.length)(added(shown, text));
}

/** A new message for the rest was asked for and its answer lost: it is taken over if Slack made it, else asked for again. */
async function rollOn(env: Env, token: string, thread: Thread, before: Chain, rolling: Part, text: string, open: (markdown: string) => Promise<DeliveryResult>): Promise<DeliveryResult> {
  const found = await findOpened(env, token, thread, Number(rolling.ts), before.at(-1)?.ts);
  if (!found.ok) return found;
  if (found.ts === undefined) return open(partOf(text, rolling.from));
  return edit(env, token, thread.channel, before, { ts: found.ts, from: rolling.from, state: "stream" }, text);
}

/**
 * The outbox's finish of a streamed reply's last message with the reply's
 * first part. A stream Slack will not stop (it expired, or it refuses) keeps
 * what it shows, and the rest is posted as a new message in the thread
 * (`postRest`, with the outbox row's own read-back), never dropped.
 * `uncertain`: an earlier attempt may have stopped it already, so the message
 * is read back first.
 */
export async function finishStream(
  env: Env,
  token: string,
  thread: Thread,
  finish: { ref: string; shown: string | undefined; text: string; uncertain: boolean },
  postRest: (markdown: string) => Promise<DeliveryResult>,
): Promise<DeliveryResult> {
  const { ref, shown, text } = finish;
  const done = (result: DeliveryResult): DeliveryResult => (result.ok ? { ok: true } : result);
  const since = openingSince(ref);
  if (since !== undefined) {
    const found = await findOpened(env, token, thread, since);
    if (!found.ok) return found;
    if (found.ts === undefined) return postRest(slackMarkdown(text));
    return done(await edit(env, token, thread.channel, [], { ts: found.ts, from: 0, state: "stream" }, text));
  }
  const chain = chainOf(ref);
  if (!chain) return { ok: false, error: `not a Slack message: ${ref}`, permanent: true };
  if (shown === undefined || !text.startsWith(shown)) return done(await restart(env, token, thread, chain, text));
  const before = chain.slice(0, -1);
  const last = chain.at(-1)!;
  if (last.state === "rolling") return done(await rollOn(env, token, thread, before, last, text, postRest));
  if (last.state === "plain") return shown === text ? { ok: true } : done(await edit(env, token, thread.channel, before, last, text));
  const rest = added(shown, text);
  const stopped = await callSlack(env, "chat.stopStream", token, { channel: thread.channel, ts: last.ts, ...(rest ? { markdown_text: rest } : {}) });
  if (stopped.ok || !stopped.permanent) return done(stopped);
  if (finish.uncertain) {
    const showing = await messageText(env, token, thread, last.ts);
    if (!showing.ok) return showing;
    if (showing.text === partOf(text, last.from)) return { ok: true }; // the earlier stop went through
  }
  console.warn(`slack: the stream of message ${last.ts} could not be stopped (${stopped.error}); the rest of the reply is posted as a new message`);
  return rest.trim() === "" ? { ok: true } : postRest(rest);
}

/**
 * The reply starts again (a model call run again after a crash wrote another):
 * the first message is edited to the whole of it, and the messages a roll
 * made after it are deleted, so the thread shows the new reply once.
 */
async function restart(env: Env, token: string, thread: Thread, chain: Chain, text: string): Promise<DeliveryResult> {
  for (const part of chain.slice(1).reverse()) {
    let ts: string | undefined = part.ts;
    if (part.state === "rolling") {
      const found = await findOpened(env, token, thread, Number(part.ts), chain[chain.indexOf(part) - 1]!.ts);
      if (!found.ok) return found;
      ts = found.ts;
    }
    if (ts === undefined) continue;
    if (part.state !== "plain") {
      const stopped = await callSlack(env, "chat.stopStream", token, { channel: thread.channel, ts });
      if (!stopped.ok && !notStreaming(stopped) && !stopped.error.endsWith("message_not_found")) return stopped;
    }
    const deleted = await callSlack(env, "chat.delete", token, { channel: thread.channel, ts });
    if (!deleted.ok && !deleted.error.endsWith("message_not_found")) return deleted;
  }
  return edit(env, token, thread.channel, [], chain[0]!, text);
}

/** Slack's clock is not the Worker's: the thread is read from a minute before the opening was asked for. */
const CLOCK_SKEW_MS = 60_000;

/**
 * The message an opening whose answer was lost made, if Slack made it: the
 * bot's newest message in the thread since then that carries no outbox row's
 * metadata (every post does; a stream cannot). Undefined ts: none was made.
 */
async function findOpened(env: Env, token: string, thread: Thread, since: number, after?: string): Promise<{ ok: true; ts?: string } | Extract<SlackResult, { ok: false }>> {
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
  // `after`: the message a roll went on from, itself no candidate (nor anything before it).
  const candidates = messages.filter((m) => mine(m) && typeof m?.ts === "string" && m.ts !== thread.thread_ts && m.metadata === undefined && (after === undefined || m.ts > after));
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

/** A new message in the thread showing `markdown`, the reply from its `from`-th character on, after the messages `before`. */
async function open(env: Env, token: string, route: Route, thread: Thread, target: StreamTarget, before: Chain, from: number, markdown: string): Promise<DeliveryResult> {
  const made = (ts: unknown, state: Part["state"]): DeliveryResult => ({ ok: true, ref: refOf([...before, { ts: String(ts), from, state }]) });
  if (!(await refusesStreaming(env, route.tenant))) {
    // Outside a DM Slack wants the person the stream is for, and their own workspace.
    const team = target.recipient?.team ?? (route.tenant.startsWith("T") ? route.tenant : undefined);
    const recipient = target.recipient?.platform === "slack" && team ? { recipient_team_id: team, recipient_user_id: target.recipient.id } : {};
    const started = await callSlack(env, "chat.startStream", token, { ...thread, markdown_text: markdown, ...recipient });
    if (started.ok) return made(started.data.ts, "stream");
    if (!started.permanent) return started;
    await rememberRefusal(env, route.tenant, started.error);
  }
  // The workspace has no streaming (or refuses it here): one message, edited as the reply grows.
  const posted = await callSlack(env, "chat.postMessage", token, { ...thread, markdown_text: markdown, unfurl_links: false });
  return posted.ok ? made(posted.data.ts, "plain") : posted;
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

/** Stops the message's stream first if it is open; it is then a plain one, edited to show its part of `text`. */
async function edit(env: Env, token: string, channel: string, before: Chain, part: Part, text: string): Promise<DeliveryResult> {
  if (part.state === "stream") {
    const stopped = await callSlack(env, "chat.stopStream", token, { channel, ts: part.ts });
    // A stream already stopped (an earlier attempt's answer was lost, or Slack expired it) is a plain message to edit.
    if (!stopped.ok && !notStreaming(stopped)) return stopped;
  }
  const updated = await callSlack(env, "chat.update", token, { channel, ts: part.ts, markdown_text: partOf(text, part.from) });
  return updated.ok ? { ok: true, ref: refOf([...before, { ...part, state: "plain" }]) } : updated;
}

// Delivery of outbox rows to Slack: replies and notices posted in the
// thread, the status message and approval cards posted once and updated in
// place; a turn's answer takes its status message's place (answersInStatus),
// so a plain turn is one post and one update. Every post carries its row's idempotency key in its metadata, and a
// row whose earlier answer was lost is looked for before it is posted again.
import type { KnownBlock, MessageMetadata } from "@slack/types";
import type { ChatOutbound, DeliveryResult, OutboundMessage, OutboxDelivery, PaceRule, ReplyAddress, Route, TypingSchedule } from "../../runtime/index.ts";
import { clip } from "../../lib/text.ts";
import { isAssistantThread, setStatus } from "./assistant.ts";
import { cardBlocks, cardFallback } from "./card.ts";
import { statusRenewalMs } from "./config.ts";
import { botTokenFor } from "./installations.ts";
import { SLACK_MARKDOWN_LIMIT, slackMarkdown, splitForSlack, toMrkdwn } from "./mrkdwn.ts";
import { finishStream, streamReply } from "./stream.ts";
import { STATUS_LIMIT, statusBlocks, statusText, stopValue, UPDATE_SPACING_MS } from "./status.ts";
import { callSlack } from "./web-api.ts";

/** What we send to chat.postMessage and chat.update (their other arguments are not used). */
type SlackMessage = {
  channel: string;
  thread_ts?: string;
  ts?: string;
  /** mrkdwn, or the fallback of blocks; a reply goes as markdown_text instead. */
  text?: string;
  markdown_text?: string;
  blocks?: KnownBlock[];
  unfurl_links?: boolean;
  metadata?: MessageMetadata;
};

/** The metadata event type our posts carry; its payload is `{ key }`, the outbox row's idempotency key. */
const OUTBOX_EVENT = "antiproton_outbox";
/** The thread is read from the row's creation on, less this: Slack's clock is not the Worker's. */
const CLOCK_SKEW_MS = 60_000;
/** Once Slack has refused a post in a channel (429), its new messages go this far apart on average while it stays busy (paceOf)... */
const POST_SPACING_MS = 1_100;
/** ...two back to back after a quiet spell: the least of Slack's "short bursts >1" (a turn's status, then its quick reply). */
const POST_BURST = 2;
/** Messages read back at once: the row's own is among the first after it was written (the thread's later rows wait for it). */
const READ_BACK_LIMIT = 100;

async function deliver(env: Env, delivery: OutboxDelivery): Promise<DeliveryResult> {
  const { channel, thread_ts } = delivery.address.target;
  // A DM's running conversation is answered in the DM itself: no thread.
  if (typeof channel !== "string" || (thread_ts !== undefined && typeof thread_ts !== "string")) {
    return { ok: false, error: "reply address has no Slack channel (and thread)", permanent: true, unreachable: true };
  }
  const token = await botTokenFor(env, delivery.route.tenant);
  if (!token) return { ok: false, error: `no bot token for workspace ${delivery.route.tenant}`, permanent: true, unreachable: true };

  const thread = thread_ts === undefined ? { channel } : { channel, thread_ts };
  const message = delivery.message;
  switch (message.kind) {
    case "reply":
    case "notice": {
      // Replies arrive split to fit; they and notices go as Slack's Markdown, as a streamed reply does (bridges/slack/stream.ts).
      const reply = (markdown: string) => post(env, token, delivery, { ...thread, markdown_text: markdown, unfurl_links: false });
      if (message.kind === "reply") {
        // A reply with a ref finishes that message (one streamed as it was written, or the status message it
        // takes the place of): the message is edited into the reply, not a second one posted.
        if (!delivery.ref) return reply(slackMarkdown(message.text));
        const finish = { ref: delivery.ref, shown: delivery.shown, text: message.text, uncertain: delivery.uncertain === true };
        const finished = await finishStream(env, token, thread, finish, reply);
        // The message is gone (a person deleted the status message): the reply is posted, never lost.
        return !finished.ok && finished.error.endsWith("message_not_found") ? reply(slackMarkdown(message.text)) : finished;
      }
      // A notice (a long provider error, say) is clipped, never refused.
      return reply(clip(slackMarkdown(message.text), SLACK_MARKDOWN_LIMIT));
    }
    case "status": {
      // An assistant thread shows the working state under its input instead (cleared once the turn ends).
      if (thread_ts !== undefined && !statusIsMessage(delivery.address)) {
        const set = await setStatus(env, token, channel, thread_ts, assistantStatus(message));
        return set.ok ? { ok: true } : set;
      }
      const text = clip(toMrkdwn(message.text), STATUS_LIMIT);
      const blocks = statusBlocks(message.state, text, stopValue(delivery.route, delivery.conversation));
      return postOrUpdate(env, token, delivery, { ...thread, text: statusText(message.state, text), blocks });
    }
    case "card":
      return postOrUpdate(env, token, delivery, { ...thread, text: cardFallback(message.card), blocks: cardBlocks(message.card) });
  }
}

/**
 * chat.postMessage takes about one message a second per channel, "generous
 * bursts" allowed, and Slack keeps how generous to itself: its 429 is the
 * authority. A new message in a channel goes under its pace key, at once
 * until Slack refuses one; then the key waits out the Retry-After and, while
 * the channel stays busy, its posts go this far apart on average (a tenth
 * over the second, for the couriers' clocks and the way to Slack), two at once
 * after a quiet spell. Updates, stopped streams and an assistant thread's
 * status post nothing new.
 */
function paceOf(delivery: OutboxDelivery): PaceRule[] {
  const { channel, thread_ts } = delivery.address.target;
  const posts = delivery.ref === undefined && (delivery.message.kind !== "status" || thread_ts === undefined || !isAssistantThread(delivery.address.target));
  if (typeof channel !== "string" || !posts) return [];
  return [{ key: `slack:${delivery.route.tenant}:${channel}`, keeper: `slack:${delivery.route.tenant}`, spacingMs: POST_SPACING_MS, burst: POST_BURST, pacedAfterHold: true }];
}

/** Whether a turn's status is a message of the thread (so its answer can take its place), not an assistant thread's line under the input. */
function statusIsMessage(address: ReplyAddress): boolean {
  return address.target.thread_ts === undefined || !isAssistantThread(address.target);
}

/** The line under an assistant thread's input while a turn works. */
const THINKING = "is thinking…";

/** The line under an assistant thread's input: thinking while the turn works, then what it waits for, or nothing. */
function assistantStatus(message: Extract<OutboundMessage, { kind: "status" }>): string {
  if (message.state === "working") return THINKING;
  return message.waitingFor ? `is waiting for approval of ${message.waitingFor.join(", ")}…` : "";
}

/**
 * Slack removes an assistant thread's status two minutes after it was set
 * if no message came: while a turn works it is set again before then
 * (runtime/effects/typing.ts), first only then, since the turn's working
 * status set it as it began. A thread whose status is a message has nothing
 * that fades.
 */
function typingSchedule(env: Env, address: ReplyAddress): TypingSchedule | null {
  if (statusIsMessage(address)) return null;
  const every = statusRenewalMs(env);
  return { firstMs: every, everyMs: every };
}

/** The working status of an assistant thread, set again. */
async function typing(env: Env, route: Route, address: ReplyAddress): Promise<DeliveryResult> {
  const { channel, thread_ts } = address.target;
  if (typeof channel !== "string" || typeof thread_ts !== "string") return { ok: false, error: "reply address is no Slack assistant thread", permanent: true };
  const token = await botTokenFor(env, route.tenant);
  if (!token) return { ok: false, error: `no bot token for workspace ${route.tenant}`, permanent: true };
  const set = await setStatus(env, token, channel, thread_ts, THINKING);
  return set.ok ? { ok: true } : set;
}

/** Posts a message meant to change in place, or updates it once it has a ref (chat.update takes no thread_ts; it is idempotent). */
async function postOrUpdate(env: Env, token: string, delivery: OutboxDelivery, message: SlackMessage): Promise<DeliveryResult> {
  if (delivery.ref) {
    const { channel, text, blocks } = message;
    const updated = await callSlack(env, "chat.update", token, { channel, ts: delivery.ref, text, blocks } satisfies SlackMessage);
    return updated.ok ? { ok: true } : updated;
  }
  return post(env, token, delivery, message);
}

/** A new message in the thread, marked with the row's key; an uncertain row is first looked for. */
async function post(env: Env, token: string, delivery: OutboxDelivery, message: SlackMessage): Promise<DeliveryResult> {
  if (delivery.uncertain) {
    const found = await findPosted(env, token, message.channel, message.thread_ts, delivery);
    if (found) return found;
  }
  const metadata = { event_type: OUTBOX_EVENT, event_payload: { key: delivery.idempotencyKey } };
  const posted = await callSlack(env, "chat.postMessage", token, { ...message, metadata } satisfies SlackMessage);
  return posted.ok ? { ok: true, ref: String(posted.data.ts) } : posted;
}

type ReadMessage = { ts?: unknown; metadata?: { event_type?: unknown; event_payload?: { key?: unknown } } } | null;

/**
 * Reads the thread back (conversations.replies, with metadata; a top-level
 * message: conversations.history) for the row's
 * message: found → the row is sent, with that message's ts; not there → null,
 * post it. A read Slack will not serve (a scope the install lacks) is logged
 * and the row posted, as before this check; a read to try again later is
 * returned as that failure, so the row waits rather than risk a second post.
 */
async function findPosted(env: Env, token: string, channel: string, threadTs: string | undefined, delivery: OutboxDelivery): Promise<DeliveryResult | null> {
  const query = new URLSearchParams({
    channel,
    ...(threadTs === undefined ? {} : { ts: threadTs }),
    oldest: ((delivery.createdAt - CLOCK_SKEW_MS) / 1000).toFixed(6),
    include_all_metadata: "true",
    limit: String(READ_BACK_LIMIT),
  });
  const read = await callSlack(env, threadTs === undefined ? "conversations.history" : "conversations.replies", token, query);
  if (!read.ok) {
    if (!read.permanent) return read;
    console.warn(`slack: could not look for outbox row ${delivery.idempotencyKey} before posting it again (${read.error})`);
    return null;
  }
  const messages = Array.isArray(read.data.messages) ? (read.data.messages as ReadMessage[]) : [];
  const mine = messages.find((m) => m?.metadata?.event_type === OUTBOX_EVENT && m.metadata.event_payload?.key === delivery.idempotencyKey);
  return typeof mine?.ts === "string" ? { ok: true, ref: mine.ts } : null;
}

export const slackOutbound: ChatOutbound = {
  platform: "slack",
  split: (text) => splitForSlack(text),
  deliver,
  paceOf,
  updateSpacingMs: UPDATE_SPACING_MS,
  stream: streamReply,
  typing,
  typingSchedule,
  // The status message (and its Stop button) becomes the answer: chat.update with markdown_text replaces its blocks.
  answersInStatus: statusIsMessage,
  // A DM is an `im` channel, whose id starts with D.
  isDirect: (_by, address) => address?.platform === "slack" && /^D[A-Z0-9]+$/.test(String(address.target.channel ?? "")),
};

// Teams' side of the outbox, through the Bot Connector at the conversation's
// serviceUrl: a turn's status is a message the answer is updated into (PUT),
// a card an Adaptive Card updated as its hold is decided, the rest new
// messages, in the conversation (a channel's thread, a chat); a reply the
// model writes slowly is streamed (stream.ts). Text goes as Markdown, split
// at TEAMS_MESSAGE_LIMIT. Paced per conversation (Teams
// allows a bot about seven messages a second in one, sixty in thirty
// seconds) and per app; a 429's Retry-After holds them.
//
// The Connector has no idempotency key and no way for a bot to read a chat
// back, so a message whose answer was lost cannot be looked for: it is sent
// again. The answer of a plain turn is an update of its status message
// (answersInStatus), which repeats harmlessly.
import { clip, splitText } from "../../lib/text.ts";
import { openingSince, type ChatOutbound, type DeliveryResult, type OutboundMessage, type OutboxDelivery, type PaceRule, type ReplyAddress, type Route, type TypingSchedule } from "../../runtime/index.ts";
import { statusText } from "../shared/status.ts";
import { activitiesPath, targetSchema } from "./address.ts";
import { cardAttachment, TEAMS_MESSAGE_LIMIT } from "./card.ts";
import { callConnector, deliveryOf } from "./connector.ts";
import { finishStream, streamOf, streamReply } from "./stream.ts";

/** Sixty in thirty seconds in a conversation, learned: sent at once until Teams says otherwise. */
const CONVERSATION_SPACING_MS = 500;
/** The app's own limit across conversations (about fifty a second for a bot). */
const APP_SPACING_MS = 20;

function render(message: OutboundMessage): Record<string, unknown> {
  switch (message.kind) {
    case "card":
      return { type: "message", attachments: [cardAttachment(message.card)] };
    case "status":
      return { type: "message", textFormat: "markdown", text: clip(statusText(message), TEAMS_MESSAGE_LIMIT) };
    default:
      return { type: "message", textFormat: "markdown", text: clip(message.text, TEAMS_MESSAGE_LIMIT) };
  }
}

async function deliver(env: Env, delivery: OutboxDelivery): Promise<DeliveryResult> {
  const target = targetSchema.safeParse(delivery.address.target);
  if (!target.success) return { ok: false, error: "reply address is not a Teams conversation", permanent: true };
  const { serviceUrl, conversationId } = target.data;
  const activity = render(delivery.message);
  // A streamed message whose opening was never answered is not looked for: the reply is posted.
  const ref = openingSince(delivery.ref) === undefined ? delivery.ref : undefined;
  const stream = streamOf(ref);
  if (stream && delivery.message.kind === "reply") return finishStream(env, serviceUrl, conversationId, stream.id, delivery.message.text);
  if (ref !== undefined && !stream) {
    const updated = await callConnector(env, serviceUrl, "PUT", activitiesPath(conversationId, ref), { ...activity, id: ref });
    // A reply whose status message a person deleted is posted instead of lost.
    if (!(delivery.message.kind === "reply" && updated.status === 404)) {
      const result = deliveryOf(updated);
      return result.ok ? { ...result, ref } : result;
    }
  }
  return deliveryOf(await callConnector(env, serviceUrl, "POST", activitiesPath(conversationId), activity));
}

/** Per conversation (learned: at once until a 429) and per app. */
function paceOf(delivery: OutboxDelivery): PaceRule[] {
  const target = targetSchema.safeParse(delivery.address.target);
  if (!target.success) return [];
  const keeper = `teams:${delivery.route.tenant}`;
  return [
    { key: `${keeper}:conversation:${target.data.conversationId}`, keeper, spacingMs: CONVERSATION_SPACING_MS, burst: 7, pacedAfterHold: true },
    { key: "teams:app", spacingMs: APP_SPACING_MS },
  ];
}

/** Teams shows "typing…" for about three seconds, or until the bot's next message: sent again every three. */
const TYPING: TypingSchedule = { firstMs: 0, everyMs: 3_000 };

async function typing(env: Env, _route: Route, address: ReplyAddress): Promise<DeliveryResult> {
  const target = targetSchema.safeParse(address.target);
  if (!target.success) return { ok: false, error: "reply address is not a Teams conversation", permanent: true };
  return deliveryOf(await callConnector(env, target.data.serviceUrl, "POST", activitiesPath(target.data.conversationId), { type: "typing" }));
}

export const teamsOutbound: ChatOutbound = {
  platform: "teams",
  split: (text) => splitText(text, TEAMS_MESSAGE_LIMIT),
  deliver,
  paceOf,
  typing,
  typingSchedule: () => TYPING,
  stream: streamReply,
  // The status message is updated into the answer: a plain turn is one post and one update, and the answer never shows twice.
  answersInStatus: () => true,
  updateSpacingMs: CONVERSATION_SPACING_MS,
  isDirect: (_by, address) => address?.target.direct === true,
};

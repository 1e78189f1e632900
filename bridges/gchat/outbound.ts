// Google Chat's side of the outbox, through the Chat API as the app's
// service account: a turn's status is a message (in the person's thread)
// that the answer is edited into, a card a Cards v2 message edited as its
// hold is decided, the rest new messages in the space and thread. Text goes
// in Chat's formatting (text.ts), split at 4,096 characters.
//
// Said once across a kill: every new message is created with a messageId
// made from the outbox row's idempotency key, so a create sent again (its
// answer lost) is refused 409 ALREADY_EXISTS and is the message already made,
// named by that id. Edits (PATCH) repeat harmlessly. Paced per space (Chat
// takes one write a second in a space) and per app; a 429 holds them.
import { sha256Hex } from "../../lib/http.ts";
import { clip, splitText } from "../../lib/text.ts";
import type { ChatOutbound, DeliveryResult, OutboundMessage, OutboxDelivery, PaceRule } from "../../runtime/index.ts";
import { messageName, targetSchema, type GchatTarget } from "./address.ts";
import { callChat, deliveryOf } from "./api.ts";
import { cardMessage, GCHAT_MESSAGE_LIMIT } from "./card.ts";
import { markdownToChat } from "./text.ts";

const STATUS_ICONS = { working: "⏳", done: "✅", stopped: "⏹️", failed: "⚠️" } as const;
/** Chat's per-space write limit: one a second. */
const SPACE_SPACING_MS = 1_000;
/** The app's writes across spaces: 3,000 a minute per project. */
const APP_SPACING_MS = 20;

function body(message: OutboundMessage): Record<string, unknown> {
  switch (message.kind) {
    case "card":
      return { text: "", ...cardMessage(message.card) };
    case "status":
      return { text: clip(markdownToChat(`${STATUS_ICONS[message.state]} ${message.text}`), GCHAT_MESSAGE_LIMIT), cardsV2: [] };
    default:
      return { text: clip(markdownToChat(message.text), GCHAT_MESSAGE_LIMIT), cardsV2: [] };
  }
}

/** A client-assigned message id ("client-" and lowercase letters, digits, hyphens; at most 63) from the row's key. */
const clientMessageId = async (key: string) => `client-${(await sha256Hex(key)).slice(0, 40)}`;

async function create(env: Env, target: GchatTarget, message: OutboundMessage, key: string): Promise<DeliveryResult> {
  const messageId = await clientMessageId(key);
  const query: Record<string, string> = { messageId };
  const payload: Record<string, unknown> = { ...body(message) };
  if (target.thread !== undefined) {
    query.messageReplyOption = "REPLY_MESSAGE_FALLBACK_TO_NEW_THREAD";
    payload.thread = { name: target.thread };
  }
  if (payload.cardsV2 !== undefined && (payload.cardsV2 as unknown[]).length === 0) delete payload.cardsV2;
  const answer = await callChat(env, "POST", `${target.space}/messages`, query, payload);
  // Made before (an answer lost): that message is this row's.
  if (answer.status === 409) return { ok: true, ref: `${target.space}/messages/${messageId}` };
  return deliveryOf(answer);
}

async function deliver(env: Env, delivery: OutboxDelivery): Promise<DeliveryResult> {
  const target = targetSchema.safeParse(delivery.address.target);
  if (!target.success) return { ok: false, error: "reply address is not a Google Chat space", permanent: true };
  const { message } = delivery;
  const ref = messageName.safeParse(delivery.ref);
  if (ref.success) {
    const edited = await callChat(env, "PATCH", ref.data, { updateMask: "text,cardsV2" }, body(message));
    // A reply whose status message a person deleted is posted instead of lost.
    if (!(message.kind === "reply" && edited.status === 404)) return deliveryOf(edited);
  }
  return create(env, target.data, message, delivery.idempotencyKey);
}

function paceOf(delivery: OutboxDelivery): PaceRule[] {
  const target = targetSchema.safeParse(delivery.address.target);
  if (!target.success) return [];
  return [
    { key: `gchat:space:${target.data.space}`, keeper: `gchat:${delivery.route.tenant}`, spacingMs: SPACE_SPACING_MS, burst: 2, pacedAfterHold: true },
    { key: "gchat:app", spacingMs: APP_SPACING_MS },
  ];
}

export const gchatOutbound: ChatOutbound = {
  platform: "gchat",
  split: (text) => splitText(text, GCHAT_MESSAGE_LIMIT),
  deliver,
  paceOf,
  // The status message is edited into the answer: a plain turn is one post and one edit.
  answersInStatus: () => true,
  updateSpacingMs: SPACE_SPACING_MS,
  isDirect: (_by, address) => address?.target.direct === true,
};

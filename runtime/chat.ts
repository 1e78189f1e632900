// The named interface between bridges and the runtime: what comes in (ChatEvent)
// and what goes out (OutboundMessage through a ChatOutbound), and what the
// Worker entry hands the runtime rather than the runtime importing it.
import type { Card } from "../approvals/index.ts";
import type { Plugin } from "../plugins/index.ts";

/**
 * Who brought an event: a bridge's name (its ChatOutbound's `platform`), or
 * the runtime's own surfaces, `api` and `console`. The runtime names no bridge.
 */
export type Platform = string;

/** Which object an event is for. Both parts are validated by `parseRoute`. */
export interface Route {
  tenant: string;
  agent: string;
}

export interface ChatUser {
  platform: Platform;
  id: string;
  name?: string;
  /** The person's own workspace, where that is not the tenant (a Slack organisation's install spans several). */
  team?: string;
}

/**
 * Where replies for a conversation go. Owned by the bridge that made it: the
 * runtime stores it verbatim and hands it back to that bridge's outbound.
 */
export interface ReplyAddress {
  platform: Platform;
  target: Record<string, string | number | boolean | null>;
}

interface ChatEventBase {
  /** Idempotency key: a platform retry of one event carries the same id. */
  id: string;
  /** Conversation id chosen by the bridge (a Slack thread, a Discord channel…). */
  conversation: string;
  user: ChatUser;
  replyTo?: ReplyAddress;
}

export type ChatCommand = "stop" | "compact" | "status";

/**
 * A file shared with a person's message, as its bridge fetched it (the object
 * never fetches): its text, an image (shown to models that take images), or
 * only its name and why it is not shown. A bridge gives an image's bytes
 * (base64 `data`); the edge stores them in R2 and the object gets `ref`, their
 * sha256 (runtime/store/pictures.ts).
 */
export type Attachment = { name: string; mimeType: string; bytes: number } & (
  | { kind: "text"; text: string }
  | { kind: "image"; data: string; ref?: undefined }
  | { kind: "image"; ref: string; data?: undefined }
  | { kind: "named"; note: string }
);

export type ChatEvent =
  /** A new turn, or a steer when the conversation's turn is running. */
  | (ChatEventBase & { kind: "message"; text: string; attachments?: Attachment[] })
  | (ChatEventBase & { kind: "steer"; text: string; attachments?: Attachment[] })
  /** Context the model sees at its next step (what the person is looking at); it starts no turn. */
  | (ChatEventBase & { kind: "note"; text: string })
  | (ChatEventBase & { kind: "interrupt" })
  | (ChatEventBase & { kind: "command"; command: ChatCommand })
  /**
   * A click on an approval card. `boundTo` is the (tenant, agent) the button
   * value was made for (see approvals' parseDecisionValue); the object refuses
   * a value bound elsewhere. `reason`: why, where the decider said (the
   * Responses API's mcp_approval_response); the agent is told it.
   */
  | (ChatEventBase & { kind: "decision"; holdId: string; approve: boolean; boundTo: Route; reason?: string });

export type ConversationStatus = "idle" | "running" | "waiting_model" | "failed";

export interface SubmitResult {
  /** False when this event id was seen before: nothing was written. */
  accepted: boolean;
  conversation: string;
  status: ConversationStatus;
  /** True for the message that starts the conversation's first turn (a bridge may title the thread after it). */
  first?: boolean;
  /** A sentence for the person, for commands answered at once (status, stop…). */
  notice?: string;
  /** For a decision: the card as it now stands, for platforms that answer a click by updating it. */
  card?: Card;
  /** For a decision: true only for the click that decided the hold (the others are told it was decided). */
  decided?: boolean;
}

/** What the runtime asks a bridge to show. Markdown text; bridges render it. */
export type OutboundMessage =
  | { kind: "reply"; text: string }
  /**
   * The visible working state of a turn, posted once and then updated in place
   * (or, where the platform shows the answer in its place, ChatOutbound.answersInStatus, ended by the reply).
   * `waitingFor`: a turn done with calls still held names them (a bridge may show it as a state).
   */
  | { kind: "status"; state: "working" | "done" | "stopped" | "failed"; text: string; waitingFor?: string[] }
  /** Something the person must know that the model did not say (a failed turn). */
  | { kind: "notice"; text: string }
  /** An approval card, posted once and then updated in place (ref) as the hold is decided. */
  | { kind: "card"; card: Card };

export interface OutboxDelivery {
  route: Route;
  conversation: string;
  address: ReplyAddress;
  message: OutboundMessage;
  /** Stable per outbox row: a retry of one row carries the same key. */
  idempotencyKey: string;
  /** When the row was written (ms): no attempt at it reached the platform before. */
  createdAt: number;
  /** For in-place updates (status, card, a reply in place of the status): the platform reference returned when it was first posted. */
  ref?: string;
  /**
   * For a reply that finishes a streamed message (ref set): what the message
   * shows now, as its courier last reported (unknown after a crash).
   */
  shown?: string;
  /**
   * An earlier attempt at this very row may have reached the platform without
   * its answer reaching the runtime: look for the message (by the idempotency
   * key) before posting it again.
   */
  uncertain?: boolean;
}

/**
 * A chat platform's word that no call under a pace key may go for `ms` (a
 * spent rate-limit bucket, a 429): every courier sending under that key waits
 * it out (runtime/courier/pace.ts).
 */
export interface PaceHold {
  key: string;
  ms: number;
}

/**
 * The rate limit a delivery falls under: its key (a channel, a route; shared
 * by every courier that sends there), the least time between two sends under
 * it on average (0: only the platform's holds pace it), and how many may go
 * back to back after a quiet spell (`burst`, 1 when absent). `keeper`: the
 * pace object that keeps the key's number (a workspace's, so a new channel
 * wakes no new object); the key itself when absent. `pacedAfterHold`: the
 * spacing is the platform's, learned: sends go at once until the platform
 * holds the key (a 429), and keep the spacing only while the key stays busy
 * after that.
 */
export interface PaceRule {
  key: string;
  spacingMs: number;
  burst?: number;
  keeper?: string;
  pacedAfterHold?: boolean;
}

/**
 * A send's answer. `retryAfterMs`: the platform refused it for its rate limit
 * and posted nothing (a wait, never a failed attempt). `permanent`: a refusal
 * that will not change by trying again; `unreachable` with it: nothing more can
 * be posted where it was going (the channel is gone, the token revoked), so no
 * word of the failure can be posted there either. `holds`: the platform's word
 * on when its limits allow the next send (absent on a 429: the delivery's pace
 * keys wait out `retryAfterMs`).
 */
export type DeliveryResult =
  | { ok: true; ref?: string; holds?: PaceHold[] }
  | { ok: false; error: string; retryAfterMs?: number; permanent?: boolean; unreachable?: boolean; holds?: PaceHold[] };

/**
 * Where a courier streams a reply while the model writes it (runtime/courier/reply-stream.ts).
 * The object's outbox finishes the message afterwards: a reply row whose ref is
 * the streamed message's.
 */
export interface StreamTarget {
  address: ReplyAddress;
  /** The person the turn answers (Slack names them when it streams outside a DM). */
  recipient?: ChatUser;
  /** The message an earlier attempt at the same model job opened (what it shows is then not known). */
  ref?: string;
  /** What the message shows, as far as the courier streaming it knows. */
  shown?: string;
}

/**
 * The ref of a streamed message while it is being opened (`opening:<ms>`): the
 * courier tells the object before it asks the platform, so a message made
 * whose answer never came back (a crash) can be looked for instead of made
 * twice. A bridge that cannot look treats it as no message yet.
 */
export const openingRef = (at: number) => `opening:${at}`;

/** When the message of an opening ref was asked for, or undefined for any other ref. */
export function openingSince(ref: string | undefined): number | undefined {
  const at = ref?.startsWith("opening:") ? Number(ref.slice("opening:".length)) : NaN;
  return Number.isFinite(at) ? at : undefined;
}

/** When a platform's typing indicator is shown during a turn (ChatOutbound.typingSchedule). */
export interface TypingSchedule {
  firstMs: number;
  everyMs: number;
}

/** What a streamed message is and shows, as a courier reports it to the object. */
export interface StreamShown {
  ref: string;
  shown: string;
}

export interface ChatOutbound {
  platform: Platform;
  /**
   * The least time between two changes of a conversation's messages updated
   * in place (a turn's status, a card): an update waits out the rest of it
   * after the conversation's last post or update of one, and while it waits a
   * later state replaces it, so the latest wins. None: updates go at once.
   */
  updateSpacingMs?: number;
  /** A reply split into the messages the platform accepts, in order. */
  split(text: string): string[];
  deliver(env: Env, delivery: OutboxDelivery): Promise<DeliveryResult>;
  /**
   * The platform's rate limits a delivery falls under, so that couriers
   * sending to one channel at once take turns instead of bouncing off a 429;
   * none: the delivery is not paced.
   */
  paceOf?(delivery: OutboxDelivery): PaceRule[];
  /**
   * Shows that the agent is at work in the conversation (Discord's typing
   * indicator, a Slack assistant thread's status), where the platform has
   * such a thing; it fades by itself, and the runtime renews it while the
   * turn works (runtime/effects/typing.ts), as `typingSchedule` says.
   */
  typing?(env: Env, route: Route, address: ReplyAddress): Promise<DeliveryResult>;
  /**
   * When `typing` is called at an address, counted from the turn's first
   * model call: first after `firstMs` (0: at once; more where the turn's
   * status already shows it, so a short turn makes no such call), then every
   * `everyMs` while the turn works; null: never at this address. None: at
   * once, then every TYPING_REFRESH_MS.
   */
  typingSchedule?(env: Env, address: ReplyAddress): TypingSchedule | null;
  /**
   * Shows `text` (the first part of the reply so far) in the streamed message:
   * opens it when the target has no ref yet, else brings it from what it shows
   * to `text`. The answer's ref names the message from then on (it may change).
   * Finishing it is `deliver`'s, for a reply row with that ref. `record`
   * tells the agent's object a new ref before a platform call whose answer
   * may be lost (the rest of the reply going on a new message, once the
   * platform ended the one it was in), so a later attempt looks for what that
   * call made instead of making it again.
   */
  stream?(env: Env, route: Route, target: StreamTarget, text: string, record: (ref: string) => Promise<void>): Promise<DeliveryResult>;
  /**
   * Whether a turn's answer takes the place of its status message at this
   * address: a reply that fits one message is delivered as the status's last
   * state (a reply row with the status message's ref, which the bridge edits
   * into the reply), and no "done" state follows it, so a plain turn is one
   * post and one update. None or false (a status that is no message, such as
   * Slack's assistant thread status): the reply is a message of its own and
   * the status is updated to done.
   */
  answersInStatus?(address: ReplyAddress): boolean;
  /**
   * Whether a conversation this bridge started is one person's direct
   * messages (plugins such as memory scope what they keep by it, so a note
   * made in a DM never reaches a channel). None: it has no DMs.
   */
  isDirect?(by: ChatUser, address: ReplyAddress | null, route: Route): boolean;
}

/** Each bridge's outbound (the runtime imports no bridge) and the plugins a mount may name. */
export interface RuntimeDeps {
  outbounds: readonly ChatOutbound[];
  plugins: readonly Plugin[];
}

export function outboundFor(deps: RuntimeDeps, platform: Platform): ChatOutbound | undefined {
  return deps.outbounds.find((o) => o.platform === platform);
}

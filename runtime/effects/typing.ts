// "The agent is typing…" while a turn works, where the platform shows it
// (its outbound has `typing`). The object only schedules: a typing effect per
// conversation, made when the model is asked; a courier makes the call; after
// each call the object schedules the next one TYPING_REFRESH_MS later, while
// the turn still works and waits for no person. It runs in the conversation's
// send lane, so it is never shown after the reply it precedes, and it ends with
// the turn: a claim after that finds nothing to do.
import type { Holds } from "../../approvals/index.ts";
import { type ReplyAddress, outboundFor, type RuntimeDeps } from "../chat.ts";
import type { ConversationRow, Conversations } from "../store/index.ts";
import type { Effects } from "./effects.ts";

/** Discord's typing indicator lasts 10 seconds; it is renewed before it fades. */
export const TYPING_REFRESH_MS = 8_000;

export class Typing {
  constructor(
    private readonly effects: Effects,
    private readonly conversations: Conversations,
    private readonly holds: Holds,
    private readonly deps: RuntimeDeps,
  ) {}

  /** The model is asked: the conversation shows typing, if its platform can. */
  start(conv: ConversationRow): void {
    if (this.addressOf(conv.id)) this.effects.add("typing", conv.id, conv.id);
  }

  /** The turn ended. */
  stop(conversation: string): void {
    this.effects.done("typing", conversation);
  }

  /** Where to show typing, or null when it is no longer wanted. */
  work(conversation: string): ReplyAddress | null {
    return this.wanted(conversation) ? this.addressOf(conversation) : null;
  }

  /** Shown (or not: a lost indicator is not retried): the next one is due before it fades. */
  report(conversation: string): boolean {
    if (!this.effects.get("typing", conversation)) return false;
    if (this.wanted(conversation)) this.effects.retryAt("typing", conversation, Date.now() + TYPING_REFRESH_MS);
    else this.stop(conversation);
    return true;
  }

  private wanted(conversation: string): boolean {
    return this.conversations.get(conversation)?.status === "running" && this.holds.pending(conversation).length === 0;
  }

  private addressOf(conversation: string): ReplyAddress | null {
    const conv = this.conversations.get(conversation);
    const address = conv ? this.conversations.replyAddress(conv) : null;
    return address && outboundFor(this.deps, address.platform)?.typing ? address : null;
  }
}

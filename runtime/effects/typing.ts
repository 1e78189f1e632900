// "The agent is typing…" while a turn works, where the platform shows it
// (its outbound has `typing`): Discord's indicator fades after 10 s, a Slack
// assistant thread's status after 2 minutes. The object only schedules: a
// typing effect per conversation, made when the model is asked and due as
// the platform's schedule says (at once, or only once the turn's own status
// would fade, so a short turn makes no such call); a courier makes the call;
// after each call the object schedules the next one, while the turn still
// works and waits for no person. It runs in the conversation's send lane, so
// it is never shown after the reply it precedes, and it ends with the turn: a
// claim after that finds nothing to do.
import type { Holds } from "../../approvals/index.ts";
import { ConfigError } from "../../lib/config.ts";
import { type ReplyAddress, outboundFor, type RuntimeDeps, type TypingSchedule } from "../chat.ts";
import type { ConversationRow, Conversations } from "../store/index.ts";
import type { Effects } from "./effects.ts";

/** A platform's typing indicator without a schedule of its own is shown at once and renewed this often (before a 10 s indicator fades). */
export const TYPING_REFRESH_MS = 8_000;

export class Typing {
  constructor(
    private readonly env: Env,
    private readonly effects: Effects,
    private readonly conversations: Conversations,
    private readonly holds: Holds,
    private readonly deps: RuntimeDeps,
  ) {}

  /** The model is asked: the conversation shows typing, if its platform can (a call made while one is due changes nothing). */
  start(conv: ConversationRow): void {
    const schedule = this.scheduleOf(conv.id);
    if (schedule) this.effects.add("typing", conv.id, conv.id, Date.now() + schedule.firstMs);
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
    const schedule = this.wanted(conversation) ? this.scheduleOf(conversation) : null;
    if (schedule) this.effects.retryAt("typing", conversation, Date.now() + schedule.everyMs);
    else this.stop(conversation);
    return true;
  }

  private wanted(conversation: string): boolean {
    return this.conversations.get(conversation)?.status === "running" && this.holds.pending(conversation).length === 0;
  }

  private addressOf(conversation: string): ReplyAddress | null {
    return this.scheduleOf(conversation) ? this.target(conversation) : null;
  }

  /** When the conversation's platform shows typing there, or null where it shows none (a setting it cannot read is logged, naming it: no typing). */
  private scheduleOf(conversation: string): TypingSchedule | null {
    const address = this.target(conversation);
    const outbound = address && outboundFor(this.deps, address.platform);
    if (!address || !outbound?.typing) return null;
    try {
      return outbound.typingSchedule ? outbound.typingSchedule(this.env, address) : { firstMs: 0, everyMs: TYPING_REFRESH_MS };
    } catch (err) {
      if (!(err instanceof ConfigError)) throw err;
      console.error(`typing in ${address.platform}: configuration error: ${err.message}`);
      return null;
    }
  }

  private target(conversation: string): ReplyAddress | null {
    const conv = this.conversations.get(conversation);
    return conv ? this.conversations.replyAddress(conv) : null;
  }
}

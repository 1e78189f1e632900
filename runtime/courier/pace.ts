// The pace of one chat rate limit: a small Durable Object per pace key (a
// Slack channel, a Discord route, Discord's global limit), shared by every
// courier that sends there. Twenty threads of one channel answered at once are
// twenty couriers; one at a time is let through here, the platform's spacing
// apart, and the others are told when to ask again, so a burst queues instead
// of bouncing off 429s. The spacing runs from when a send really left (the
// courier says so), not from when it was let through: a courier held up on
// its way would otherwise crowd the next one. A platform's own word (a spent
// bucket's reset, a 429's Retry-After) holds the key too. The object answers
// at once and never holds a caller. Its one number lives in memory: a pace is
// a courtesy to the platform, whose 429 stays the authority, so an object
// evicted or restarted mid-wait costs at most one refused send (a wait), and
// keeping no storage spares every new channel a database and each send two
// writes.
import { DurableObject } from "cloudflare:workers";
import type { DeliveryResult, PaceRule } from "../chat.ts";

/** Couriers told to ask again at the same moment ask up to this much later, spread out. */
const PACE_JITTER_MS = 50;

/** Go now, or not before `at`. */
export type Slot = { go: true } | { go: false; at: number };

export class SendPace extends DurableObject<Env> {
  /** A token bucket: sends it can let through as of `filledAt`, one more every spacing, `burst` at most. */
  private tokens = 0;
  private filledAt = 0;
  /** No send before this: the platform said so, or a send let through left only then. */
  private heldUntil = 0;

  /** Lets one send through when the key has a turn (after a quiet spell, `burst` back to back), else says when to ask again. */
  async take(spacingMs: number, burst = 1): Promise<Slot> {
    const now = Date.now();
    if (this.heldUntil > now) return { go: false, at: this.heldUntil };
    if (spacingMs <= 0) return { go: true };
    this.tokens = Math.min(burst, this.tokens + (now - this.filledAt) / spacingMs);
    this.filledAt = now;
    if (this.tokens < 1) return { go: false, at: now + Math.ceil((1 - this.tokens) * spacingMs) };
    this.tokens -= 1;
    return { go: true };
  }

  /** No send before `until`, and one then: the platform's word (its bucket is spent), or a single send's spacing from when it left. */
  async hold(until: number): Promise<void> {
    if (until <= this.heldUntil) return;
    this.heldUntil = until;
    this.tokens = 1;
    this.filledAt = until;
  }
}

export function paceStub(env: Env, key: string): DurableObjectStub<SendPace> {
  const namespace = env.SEND_PACE as DurableObjectNamespace<SendPace>;
  return namespace.get(namespace.idFromName(key));
}

/**
 * A turn to send under every rule, waiting for it until `until` (asking again
 * when told, with a little jitter so the couriers of a channel do not all ask
 * at once); past that, when to come back.
 */
export async function takeTurn(env: Env, rules: PaceRule[], until: number): Promise<Slot> {
  for (const { key, spacingMs, burst } of rules) {
    for (;;) {
      const slot = await paceStub(env, key).take(spacingMs, burst);
      if (slot.go) break;
      if (slot.at > until) return slot;
      await sleep(slot.at - Date.now() + Math.random() * PACE_JITTER_MS);
    }
  }
  return { go: true };
}

/**
 * After a send: a one-at-a-time rule's spacing runs from when it left (a
 * bursting rule's bucket counted it when it was let through), and the
 * platform's word holds its keys (a 429 without one holds every key of the
 * send for its wait).
 */
export async function holdAfter(env: Env, rules: PaceRule[], sentAt: number, result: DeliveryResult): Promise<void> {
  const told = result.holds ?? (!result.ok && result.retryAfterMs !== undefined ? rules.map(({ key }) => ({ key, ms: result.retryAfterMs! })) : []);
  const holds = [
    ...rules.filter((r) => r.spacingMs > 0 && (r.burst ?? 1) === 1).map(({ key, spacingMs }) => ({ key, until: sentAt + spacingMs })),
    ...told.map(({ key, ms }) => ({ key, until: Date.now() + ms })),
  ];
  await Promise.all(holds.map(({ key, until }) => paceStub(env, key).hold(until)));
}

export function sleep(ms: number): Promise<void> {
  return ms > 0 ? new Promise((resolve) => setTimeout(resolve, ms)) : Promise.resolve();
}

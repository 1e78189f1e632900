// The pace of the chat rate limits: a small Durable Object per keeper (a
// Slack workspace; Discord's global limit) with a token bucket per pace key
// (a channel, a route), shared by every courier that sends there. A key
// whose limit the platform keeps to itself (Slack's "generous bursts") is
// learned: its sends go at once until the platform holds the key (a 429), and
// are paced at its rate only from then until the key has been quiet. A reply
// waiting its turn goes ahead of the other sends under its key (another
// thread's status): it is what a person waits for. It answers at once and
// keeps its numbers in memory (docs/design.md, "The send pace").
import { DurableObject } from "cloudflare:workers";
import type { DeliveryResult, PaceRule } from "../chat.ts";
import { sleep } from "../../lib/timeout.ts";
import { countedNamespace } from "../../lib/object-calls.ts";

/** Couriers told to ask again at the same moment ask up to this much later, spread out. */
const PACE_JITTER_MS = 50;
/** Past this many keys, a keeper forgets those at rest (a full bucket, no hold: the same as never seen). */
const KEYS_KEPT = 256;
/** A learned key is paced from the platform's hold until this long after its last send that had to wait its turn (or after the hold ends). */
const PACED_WHILE_BUSY_MS = 10_000;
/**
 * A reply told to come back at a moment keeps that turn for itself this long
 * past it (its courier's jitter and the call back here, on a loaded machine);
 * one whose courier has gone holds the others up no longer.
 */
const AHEAD_GRACE_MS = 1_000;

/** Go now, or not before `at`. */
export type Slot = { go: true } | { go: false; at: number };

/**
 * A token bucket: sends it can let through as of `filledAt`, one more every
 * spacing, `burst` at most; none before `heldUntil`. A learned key's bucket
 * counts only before `pacedUntil` (the platform held it lately).
 */
type Bucket = {
  tokens: number;
  filledAt: number;
  heldUntil: number;
  pacedUntil: number;
  spacingMs: number;
  burst: number;
  /** Replies told to wait, by send id → until when their turn is kept for them: the others wait behind them. */
  ahead: Map<string, number>;
};

export class SendPace extends DurableObject<Env> {
  private readonly buckets = new Map<string, Bucket>();

  /**
   * Lets one send under `key` through when it has a turn (after a quiet spell,
   * `burst` back to back), else says when to ask again. `pacedAfterHold`: the
   * spacing is the platform's rate, kept only after it held the key (hold) and
   * while sends queue; otherwise every send goes at once. `reply`: the send's
   * id, when it is a reply; one told to wait goes before any other send that
   * is not a reply (its turn is kept for it until it comes back, or shortly
   * after it was told to).
   */
  async take(key: string, spacingMs: number, burst = 1, pacedAfterHold = false, reply?: string): Promise<Slot> {
    const now = Date.now();
    const bucket = this.bucket(key, now);
    Object.assign(bucket, { spacingMs, burst });
    const refuse = (at: number): Slot => {
      if (reply !== undefined) bucket.ahead.set(reply, at + AHEAD_GRACE_MS);
      return { go: false, at };
    };
    if (bucket.heldUntil > now) return refuse(bucket.heldUntil);
    if (spacingMs <= 0 || (pacedAfterHold && bucket.pacedUntil <= now)) return this.let(bucket, reply);
    bucket.tokens = Math.min(burst, bucket.tokens + (now - bucket.filledAt) / spacingMs);
    bucket.filledAt = now;
    if (bucket.tokens < 1) {
      const at = now + Math.ceil((1 - bucket.tokens) * spacingMs);
      // A send that waits its turn keeps a learned key paced: the platform would refuse it now.
      bucket.pacedUntil = Math.max(bucket.pacedUntil, at + PACED_WHILE_BUSY_MS);
      return refuse(at);
    }
    if (reply === undefined) {
      for (const [id, until] of bucket.ahead) if (until <= now) bucket.ahead.delete(id);
      // A reply was told to come back for this turn: it is the reply's.
      if (bucket.ahead.size > 0) return { go: false, at: Math.min(...bucket.ahead.values()) };
    }
    bucket.tokens -= 1;
    return this.let(bucket, reply);
  }

  /**
   * No send under `key` before `until`, and one then: the platform's word (a
   * 429, its bucket spent), or a single send's spacing from when it left. A
   * learned key is paced from then on, while it stays busy.
   */
  async hold(key: string, until: number): Promise<void> {
    const bucket = this.bucket(key, Date.now());
    if (until <= bucket.heldUntil) return;
    Object.assign(bucket, { heldUntil: until, tokens: 1, filledAt: until, pacedUntil: Math.max(bucket.pacedUntil, until + PACED_WHILE_BUSY_MS) });
  }

  private let(bucket: Bucket, reply: string | undefined): Slot {
    if (reply !== undefined) bucket.ahead.delete(reply);
    return { go: true };
  }

  private bucket(key: string, now: number): Bucket {
    let bucket = this.buckets.get(key);
    if (bucket) return bucket;
    if (this.buckets.size >= KEYS_KEPT) this.forgetRested(now);
    bucket = { tokens: 0, filledAt: 0, heldUntil: 0, pacedUntil: 0, spacingMs: 0, burst: 1, ahead: new Map() };
    this.buckets.set(key, bucket);
    return bucket;
  }

  private forgetRested(now: number): void {
    for (const [key, b] of this.buckets) {
      const full = b.spacingMs <= 0 || b.tokens + (now - b.filledAt) / b.spacingMs >= b.burst;
      if (b.heldUntil <= now && b.pacedUntil <= now && full && b.ahead.size === 0) this.buckets.delete(key);
    }
  }
}

/** The keeper of a rule's key: its own `keeper`, or the key itself. */
function paceStub(env: Env, rule: Pick<PaceRule, "key" | "keeper">): DurableObjectStub<SendPace> {
  const namespace = countedNamespace(env, "SendPace", env.SEND_PACE as DurableObjectNamespace<SendPace>);
  return namespace.get(namespace.idFromName(rule.keeper ?? rule.key));
}

/**
 * A turn to send under every rule, waiting for it until `until` (asking again
 * when told, with a little jitter so the couriers of a channel do not all ask
 * at once); past that, when to come back. `reply`: the send's id when it is a
 * reply, which goes ahead of the other sends waiting under its keys.
 */
export async function takeTurn(env: Env, rules: PaceRule[], until: number, reply?: string): Promise<Slot> {
  for (const rule of rules) {
    for (;;) {
      const slot = await paceStub(env, rule).take(rule.key, rule.spacingMs, rule.burst, rule.pacedAfterHold, reply);
      if (slot.go) break;
      if (slot.at > until) return slot;
      await sleep(slot.at - Date.now() + Math.random() * PACE_JITTER_MS);
    }
  }
  return { go: true };
}

/**
 * After a send: a one-at-a-time rule's spacing runs from when it left (a
 * bursting rule's bucket counted it when it was let through; a learned rule's
 * spacing is the platform's to start), and the platform's word holds its keys
 * (a 429 without one holds every key of the send for its wait).
 */
export async function holdAfter(env: Env, rules: PaceRule[], sentAt: number, result: DeliveryResult): Promise<void> {
  const keeperOf = (key: string) => rules.find((r) => r.key === key)?.keeper;
  const told = result.holds ?? (!result.ok && result.retryAfterMs !== undefined ? rules.map(({ key }) => ({ key, ms: result.retryAfterMs! })) : []);
  const holds = [
    ...rules.filter((r) => r.spacingMs > 0 && (r.burst ?? 1) === 1 && !r.pacedAfterHold).map(({ key, spacingMs }) => ({ key, until: sentAt + spacingMs })),
    ...told.map(({ key, ms }) => ({ key, until: Date.now() + ms })),
  ];
  await Promise.all(holds.map(({ key, until }) => paceStub(env, { key, keeper: keeperOf(key) }).hold(key, until)));
}

// The pace of one chat rate limit: a small Durable Object per pace key (a
// Slack channel, a Discord route, Discord's global limit), shared by every
// courier that sends there. Twenty threads of one channel answered at once are
// twenty couriers; one at a time is let through here, the platform's spacing
// apart, and the others are told when to ask again, so a burst queues instead
// of bouncing off 429s. The spacing runs from when a send really left (the
// courier says so), not from when it was let through: a courier held up on
// its way would otherwise crowd the next one. A platform's own word (a spent
// bucket's reset, a 429's Retry-After) holds the key too. The object answers
// at once and never holds a caller.
import { DurableObject } from "cloudflare:workers";
import { type Migration, runMigrations } from "../../lib/migrations.ts";
import type { DeliveryResult, PaceRule } from "../chat.ts";

/** Couriers told to ask again at the same moment ask up to this much later, spread out. */
const PACE_JITTER_MS = 50;

/** Append-only (lib/migrations.ts): the first adopts the table releases before versioning created on every wake. */
const MIGRATIONS: readonly Migration[] = [{ name: "pace", sql: "CREATE TABLE IF NOT EXISTS pace (id INTEGER PRIMARY KEY CHECK (id = 1), next_at INTEGER NOT NULL)" }];

/** Go now, or not before `at`. */
export type Slot = { go: true } | { go: false; at: number };

export class SendPace extends DurableObject<Env> {
  private readonly sql: SqlStorage;

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    this.sql = ctx.storage.sql;
    runMigrations(ctx.storage, MIGRATIONS);
  }

  /** Lets one send through when the key is free (the next waits `spacingMs` at least), else says when to ask again. */
  async take(spacingMs: number): Promise<Slot> {
    const now = Date.now();
    const at = this.nextAt();
    if (at > now) return { go: false, at };
    if (spacingMs > 0) this.setNextAt(now + spacingMs);
    return { go: true };
  }

  /** No send before `until`: the platform said so, or a send let through left only now (its spacing runs from then). */
  async hold(until: number): Promise<void> {
    if (until > this.nextAt()) this.setNextAt(until);
  }

  private nextAt(): number {
    return this.sql.exec<{ next_at: number }>("SELECT next_at FROM pace").toArray()[0]?.next_at ?? 0;
  }

  private setNextAt(at: number): void {
    this.sql.exec("INSERT OR REPLACE INTO pace (id, next_at) VALUES (1, ?)", at);
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
  for (const { key, spacingMs } of rules) {
    for (;;) {
      const slot = await paceStub(env, key).take(spacingMs);
      if (slot.go) break;
      if (slot.at > until) return slot;
      await sleep(slot.at - Date.now() + Math.random() * PACE_JITTER_MS);
    }
  }
  return { go: true };
}

/**
 * After a send: its spacing runs from when it left, and the platform's word
 * holds its keys (a 429 without one holds every key of the send for its wait).
 */
export async function holdAfter(env: Env, rules: PaceRule[], sentAt: number, result: DeliveryResult): Promise<void> {
  const told = result.holds ?? (!result.ok && result.retryAfterMs !== undefined ? rules.map(({ key }) => ({ key, ms: result.retryAfterMs! })) : []);
  const holds = [
    ...rules.filter((r) => r.spacingMs > 0).map(({ key, spacingMs }) => ({ key, until: sentAt + spacingMs })),
    ...told.map(({ key, ms }) => ({ key, until: Date.now() + ms })),
  ];
  await Promise.all(holds.map(({ key, until }) => paceStub(env, key).hold(until)));
}

export function sleep(ms: number): Promise<void> {
  return ms > 0 ? new Promise((resolve) => setTimeout(resolve, ms)) : Promise.resolve();
}

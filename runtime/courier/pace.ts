// The pace of one chat rate limit: a small Durable Object per pace key (a
// Slack channel, a Discord route, Discord's global limit), shared by every
// courier that sends there. Twenty threads of one channel answered at once are
// twenty couriers; each takes the next free slot here (the platform's spacing
// apart) and waits for it, so a burst queues instead of bouncing off 429s. A
// platform's own word (a spent bucket's reset, a 429's Retry-After) holds the
// key: no slot before it. The object answers at once and never holds a
// caller; a slot too far off is not taken, and its courier hands the send
// back to wait on the queue.
import { DurableObject } from "cloudflare:workers";

/** A slot taken (go at `at`), or none free before `at`: come back then. */
export type Slot = { go: true; at: number } | { go: false; at: number };

export class SendPace extends DurableObject<Env> {
  private readonly sql: SqlStorage;

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    this.sql = ctx.storage.sql;
    this.sql.exec("CREATE TABLE IF NOT EXISTS pace (id INTEGER PRIMARY KEY CHECK (id = 1), next_at INTEGER NOT NULL)");
  }

  /**
   * The next free slot, taken when it comes within `maxWaitMs` (the slot after
   * it then starts `spacingMs` later); otherwise left for others, and when to
   * come back.
   */
  async take(spacingMs: number, maxWaitMs: number): Promise<Slot> {
    const now = Date.now();
    const at = Math.max(now, this.nextAt());
    if (at - now > maxWaitMs) return { go: false, at };
    if (spacingMs > 0) this.setNextAt(at + spacingMs);
    return { go: true, at };
  }

  /** The platform said no call before `until`: the slots start there at the earliest. */
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

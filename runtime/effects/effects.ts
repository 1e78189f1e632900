// Effects: everything the object needs done off the object (a model call, a
// chat send, a remote tool call, an approved hold performed, a mount's tool
// list fetched, the typing indicator renewed) is a row here,
// next to the domain row it belongs to. The pass sends due rows to the effect
// queue in one batch; a courier claims one (the lease then runs while it
// works) and reports back. A lease that runs out sends the effect again with
// the same id; after a few, the effect is given up and its owner fails it
// with a sentence the person sees. Idle means no row, so no alarm.
import type { Route } from "../chat.ts";

export type EffectKind = "model" | "send" | "tool" | "hold" | "mount" | "typing";

/** The queue message: ids only; the courier reads the work from the object when it claims it. */
export interface EffectMessage extends Route {
  kind: EffectKind;
  id: string;
  /** Effects of one lane run one after another, in order; lanes run side by side. */
  lane: string;
}

/** Leases that may run out before an effect is given up. */
export const MAX_LEASES = 3;

/** A send's run lease; SEND_TIMEOUT_SECONDS is kept to at most half of it (config.ts). */
export const SEND_LEASE_MS = 30_000;

/** How long a courier may work on a claimed effect before it is sent again. */
const RUN_LEASE_MS: Record<EffectKind, number> = {
  // The provider call's own timeout is 120 s.
  model: 180_000,
  send: SEND_LEASE_MS,
  // Tools time out within 60 s (the http plugin's ceiling).
  tool: 90_000,
  hold: 90_000,
  // Connecting and listing, each within the mcp plugin's 60 s ceiling.
  mount: 150_000,
  typing: 30_000,
};

export type EffectRow = {
  kind: EffectKind;
  id: string;
  conversation: string;
  state: "waiting" | "sent" | "claimed";
  due_at: number;
  leases: number;
  claims: number;
  retries: number;
};

export class Effects {
  constructor(
    private readonly sql: SqlStorage,
    /** How long a sent effect may wait on the queue for a courier. */
    private readonly queueLeaseMs: number,
  ) {}

  add(kind: EffectKind, id: string, conversation: string, at = Date.now()): void {
    this.sql.exec("INSERT OR IGNORE INTO effects (kind, id, conversation, state, due_at) VALUES (?, ?, ?, 'waiting', ?)", kind, id, conversation, at);
  }

  get(kind: EffectKind, id: string): EffectRow | undefined {
    return this.sql.exec<EffectRow>("SELECT * FROM effects WHERE kind = ? AND id = ?", kind, id).toArray()[0];
  }

  /** True once the effect has left the object (it may be under way; it must not be changed). */
  inFlight(kind: EffectKind, id: string): boolean {
    const row = this.get(kind, id);
    return row !== undefined && row.state !== "waiting";
  }

  /**
   * A courier starts work: the run lease starts. Returns how many claims came
   * before this one (a claim before may have done the work without reporting),
   * or null when the effect is no longer wanted.
   */
  claim(kind: EffectKind, id: string): { earlierClaims: number } | null {
    const row = this.get(kind, id);
    if (!row) return null;
    this.sql.exec("UPDATE effects SET state = 'claimed', due_at = ?, claims = claims + 1 WHERE kind = ? AND id = ?", Date.now() + RUN_LEASE_MS[kind], kind, id);
    return { earlierClaims: row.claims };
  }

  /**
   * The last claim is known to have done nothing (the platform refused it
   * before doing anything: a rate limit), so a later claim need not wonder
   * whether it did.
   */
  refused(kind: EffectKind, id: string): void {
    this.sql.exec("UPDATE effects SET claims = MAX(claims - 1, 0) WHERE kind = ? AND id = ?", kind, id);
  }

  /**
   * The effect is to be tried again at `at`; returns how many retries it has
   * had, this one included. A wait the other side asked for (a rate limit) is
   * not a failed try: `counted` false leaves the count as it is.
   */
  retryAt(kind: EffectKind, id: string, at: number, counted = true): number {
    this.sql.exec("UPDATE effects SET state = 'waiting', due_at = ?, retries = retries + ? WHERE kind = ? AND id = ?", at, counted ? 1 : 0, kind, id);
    return this.get(kind, id)?.retries ?? 0;
  }

  done(kind: EffectKind, id: string): void {
    this.sql.exec("DELETE FROM effects WHERE kind = ? AND id = ?", kind, id);
  }

  /** All of a conversation's effects of one kind end (an interrupted turn's model job). */
  dropConversation(kind: EffectKind, conversation: string): void {
    this.sql.exec("DELETE FROM effects WHERE kind = ? AND conversation = ?", kind, conversation);
  }

  /**
   * Sends every due effect in one batch: waiting ones whose time has come, and
   * sent or claimed ones whose lease ran out (again, same id). Returns the
   * effects whose leases are exhausted: they are removed, and their owners fail them.
   */
  async send(queue: Queue<EffectMessage>, route: Route): Promise<EffectRow[]> {
    const now = Date.now();
    const due = this.sql.exec<EffectRow>("SELECT * FROM effects WHERE due_at <= ? ORDER BY due_at", now).toArray();
    const exhausted = due.filter((row) => row.state !== "waiting" && row.leases + 1 >= MAX_LEASES);
    for (const row of exhausted) this.done(row.kind, row.id);
    const toSend = due.filter((row) => !exhausted.includes(row));
    if (toSend.length === 0) return exhausted;
    try {
      // sendBatch takes at most 100 messages; the rest go on the next pass.
      await queue.sendBatch(toSend.slice(0, 100).map((row) => ({ body: { ...route, kind: row.kind, id: row.id, lane: laneOf(row) } })));
    } catch (err) {
      console.error(`sending ${toSend.length} effects failed; the alarm will try again`, err);
      return exhausted;
    }
    for (const row of toSend.slice(0, 100)) {
      const expired = row.state !== "waiting";
      if (expired) console.warn(`effect ${row.kind} ${row.id}: its lease ran out (${row.leases + 1} of ${MAX_LEASES}); sent again`);
      this.sql.exec(
        "UPDATE effects SET state = 'sent', due_at = ?, leases = leases + ? WHERE kind = ? AND id = ?",
        Date.now() + this.queueLeaseMs,
        expired ? 1 : 0,
        row.kind,
        row.id,
      );
    }
    return exhausted;
  }

  /** When the alarm must next look at effects: the earliest send time or lease end. */
  nextDue(): number | null {
    return this.sql.exec<{ at: number | null }>("SELECT MIN(due_at) AS at FROM effects").one().at;
  }
}

/**
 * Tool calls and held calls of one conversation share a lane, so they happen
 * in the order the model asked; so do its chat sends and typing indicators, so
 * typing never shows after the reply. A mount's tool list belongs to no
 * conversation: its lane is the mount's.
 */
function laneOf(row: EffectRow): string {
  if (row.kind === "mount") return `mount:${row.id}`;
  if (row.kind === "typing") return `send:${row.conversation}`;
  return `${row.kind === "hold" ? "tool" : row.kind}:${row.conversation}`;
}

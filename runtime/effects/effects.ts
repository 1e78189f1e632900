// Effects: everything the object needs done off the object (a model call, a
// chat send, a remote tool call, an approved hold performed, a mount's tool
// list fetched, the typing indicator renewed, a leased machine ended, a person's change appended
// to the audit trail) is a row here, next to the
// domain row it belongs to. The pass hands due rows to their couriers
// (the queue for any a courier did not take), each with its work
// where the work can travel (the courier claims it from the object otherwise,
// and where it must be decided when it is performed); the courier reports back. A lease that runs out is not a
// failure: the effect is sent again with the same id, for as long as the
// deadline allows; only past it is the effect given up, and its owner fails
// it with a sentence the person sees. Idle means no row, so no alarm.
import type { Route } from "../chat.ts";
import { withTimeout } from "../../lib/timeout.ts";

export type EffectKind = "model" | "send" | "tool" | "hold" | "mount" | "typing" | "lease" | "audit";

/** An effect on its way to a courier (straight, or in a queue message): the effect and, where it can travel, its work. */
export interface EffectMessage extends Route {
  kind: EffectKind;
  id: string;
  /** Effects of one lane run one after another, in order; lanes run side by side. */
  lane: string;
  /** How many times the object has sent this effect, this time included. */
  attempt: number;
  /** The work as the object held it when it sent the effect; absent, the courier claims it. */
  work?: unknown;
}

/**
 * What to send for a due effect: its work, a message the courier claims the
 * work for, nothing because its work was handed to a courier at hand
 * ("taken": under way all the same), or nothing because it is no longer
 * wanted (null: the effect ends).
 */
export type Dispatch = { work: unknown } | "claim" | "taken" | null;

/** A queue message's body is at most 128 KB, a batch 256 KB (the queue is the fallback carrier): larger work is claimed instead, and batches are cut by size. */
const MAX_CARRIED_BYTES = 96 * 1024;
const MAX_BATCH_BYTES = 224 * 1024;
const MAX_BATCH_MESSAGES = 100;

/** A send's run lease; SEND_TIMEOUT_SECONDS is kept to at most half of it (config.ts). */
export const SEND_LEASE_MS = 30_000;

/** How long a courier may work on an effect before it is sent again. */
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
  // Saving a machine's kept folders (up to 50 MiB) and destroying it.
  lease: 90_000,
  // One row appended to the control plane.
  audit: 30_000,
};

export type EffectRow = {
  kind: EffectKind;
  id: string;
  conversation: string;
  state: "waiting" | "sent" | "claimed";
  due_at: number;
  leases: number;
  /** Claims by couriers: above 0, a courier may have started the work. */
  claims: number;
  /** Sends of the effect, less those the far side refused before doing anything. */
  attempts: number;
  retries: number;
  first_sent_at: number | null;
};

export class Effects {
  constructor(
    private readonly sql: SqlStorage,
    /** How long a sent effect may wait on the queue for a courier. */
    private readonly queueLeaseMs: number,
    /** How long after its first send an effect whose leases keep running out is given up. */
    private readonly deadlineMs: number,
  ) {}

  add(kind: EffectKind, id: string, conversation: string, at = Date.now()): void {
    this.sql.exec("INSERT OR IGNORE INTO effects (kind, id, conversation, state, due_at) VALUES (?, ?, ?, 'waiting', ?)", kind, id, conversation, at);
  }

  get(kind: EffectKind, id: string): EffectRow | undefined {
    return this.sql.exec<EffectRow>("SELECT * FROM effects WHERE kind = ? AND id = ?", kind, id).toArray()[0];
  }

  /** The conversation an open effect belongs to (busy time's attribution: runtime/metering/busy-time.ts). */
  conversationOf(kind: string, id: string): string | undefined {
    return this.sql.exec<{ conversation: string }>("SELECT conversation FROM effects WHERE kind = ? AND id = ?", kind, id).toArray()[0]?.conversation;
  }

  /** The conversations with an open effect of a kind other than `except` (retention keeps them: runtime/store/archive.ts). */
  openConversations(except: EffectKind): Set<string> {
    return new Set(this.sql.exec<{ conversation: string }>("SELECT DISTINCT conversation FROM effects WHERE kind != ?", except).toArray().map((row) => row.conversation));
  }

  /** True once the effect has left the object (it may be under way; it must not be changed). */
  inFlight(kind: EffectKind, id: string): boolean {
    const row = this.get(kind, id);
    return row !== undefined && row.state !== "waiting";
  }

  /**
   * A courier claims the work (it must be decided as it is performed, or it
   * could not travel): the run lease starts. Returns how many claims came
   * before this one (a claim before may have done the work without
   * reporting), or null when the effect is no longer wanted.
   */
  claim(kind: EffectKind, id: string): { earlierClaims: number; attempts: number } | null {
    const row = this.get(kind, id);
    if (!row) return null;
    this.sql.exec("UPDATE effects SET state = 'claimed', due_at = ?, claims = claims + 1 WHERE kind = ? AND id = ?", Date.now() + RUN_LEASE_MS[kind], kind, id);
    return { earlierClaims: row.claims, attempts: row.attempts };
  }

  /**
   * The last attempt is known to have done nothing (the platform refused it
   * before doing anything: a rate limit), so the next need not wonder whether
   * it did.
   */
  refused(kind: EffectKind, id: string): void {
    this.sql.exec("UPDATE effects SET attempts = MAX(attempts - 1, 0), claims = MAX(claims - 1, 0) WHERE kind = ? AND id = ?", kind, id);
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
   * Sends every due effect: waiting ones whose time has come, and sent or
   * claimed ones whose lease ran out (again, same id), each with what
   * `dispatch` says travels with it. Returns those sent (or handed on), and
   * the effects past their deadline: they are removed, and their owners fail them.
   */
  async send(carriers: EffectCarriers, route: Route, dispatch: (row: EffectRow) => Dispatch): Promise<{ sent: EffectRow[]; givenUp: EffectRow[] }> {
    const now = Date.now();
    const due = this.sql.exec<EffectRow>("SELECT * FROM effects WHERE due_at <= ? ORDER BY due_at", now).toArray();
    const expired = (row: EffectRow) => row.state !== "waiting" && row.first_sent_at !== null && now - row.first_sent_at >= this.deadlineMs;
    const givenUp = due.filter(expired);
    for (const row of givenUp) this.done(row.kind, row.id);
    const batches: { row: EffectRow; message: EffectMessage; bytes: number }[][] = [[]];
    const sent: EffectRow[] = [];
    for (const row of due.filter((r) => !expired(r))) {
      const what = dispatch(row);
      if (what === null) {
        this.done(row.kind, row.id);
        continue;
      }
      if (what === "taken") {
        this.markSent(row, now);
        sent.push(row);
        continue;
      }
      const message: EffectMessage = { ...route, kind: row.kind, id: row.id, lane: laneOf(row), attempt: row.attempts + 1 };
      const carried = typeof what === "object" ? { ...message, work: what.work } : null;
      const carriedBytes = carried ? new TextEncoder().encode(JSON.stringify(carried)).byteLength : Infinity;
      const entry = carriedBytes <= MAX_CARRIED_BYTES ? { row, message: carried!, bytes: carriedBytes } : { row, message, bytes: 512 };
      const batch = batches.at(-1)!;
      const bytes = batch.reduce((sum, e) => sum + e.bytes, 0);
      if (batch.length === MAX_BATCH_MESSAGES || (batch.length > 0 && bytes + entry.bytes > MAX_BATCH_BYTES)) batches.push([entry]);
      else batch.push(entry);
    }
    for (const batch of batches) {
      if (batch.length === 0) continue;
      const away = await handOff(carriers, batch.map(({ message }) => message));
      // Marked once a courier (or the queue) has them: an eviction while handing off leaves them due, and the next pass sends them again.
      for (const { row } of batch.filter((entry) => away.has(entry.message))) {
        this.markSent(row, now);
        sent.push(row);
      }
      if (away.size < batch.length) return { sent, givenUp };
    }
    return { sent, givenUp };
  }

  private markSent(row: EffectRow, now: number): void {
    const again = row.state !== "waiting";
    if (again) console.warn(`effect ${row.kind} ${row.id}: its lease ran out (${row.leases + 1} times); sent again`);
    this.sql.exec(
      "UPDATE effects SET state = 'sent', due_at = ?, leases = leases + ?, attempts = attempts + 1, first_sent_at = COALESCE(first_sent_at, ?) WHERE kind = ? AND id = ?",
      now + this.queueLeaseMs + RUN_LEASE_MS[row.kind],
      again ? 1 : 0,
      now,
      row.kind,
      row.id,
    );
  }

  /** When the alarm must next look at effects: the earliest send time or lease end. */
  nextDue(): number | null {
    return this.sql.exec<{ at: number | null }>("SELECT MIN(due_at) AS at FROM effects").one().at;
  }
}

/**
 * Tool calls, held calls and the end of a leased mount's machine of one
 * conversation share a lane, so they happen in the order the model asked (a
 * machine is destroyed only after the calls before it); so do its chat sends and typing indicators, so
 * typing never shows after the reply. A mount's tool list belongs to no
 * conversation: its lane is the mount's.
 */
function laneOf(row: EffectRow): string {
  if (row.kind === "mount") return `mount:${row.id}`;
  if (row.kind === "typing") return `send:${row.conversation}`;
  if (row.kind === "model") return modelLane(row.conversation);
  return `${row.kind === "hold" || row.kind === "lease" ? "tool" : row.kind}:${row.conversation}`;
}

/** The lane of a conversation's model calls: its courier holds the text they are writing (a Responses stream listens there). */
export function modelLane(conversation: string): string {
  return `model:${conversation}`;
}

// Which courier works an effect, and how a due effect reaches it. The pass
// hands each effect straight to its lane's courier: an RPC the courier answers
// once it has written the task down, never once the work is done, so a turn's
// model call leaves without a trip through the queue. The queue carries only
// those a courier did not take in time. Neither carrier is the guarantee: an
// effect sent is leased, and one not reported in time is sent again.

/** Couriers per agent: lanes hash to one, so an agent's conversations share a few warm objects. */
const COURIER_SHARDS = 8;
/** A courier that has not taken its effects by then is passed over for the queue: the pass waits no longer. */
const PASS_HAND_OFF_TIMEOUT_MS = 2_000;

/** What a due effect is handed to: its courier (by name), else the queue. */
export interface EffectCarriers {
  couriers: { idFromName(name: string): DurableObjectId; get(id: DurableObjectId): { take(effects: EffectMessage[]): Promise<void> } };
  queue: Queue<EffectMessage>;
}

/** The courier of an effect's lane: one of its agent's COURIER_SHARDS, by the lane's FNV-1a hash. */
export function courierName(effect: Pick<EffectMessage, "tenant" | "agent" | "lane">): string {
  let hash = 0x811c9dc5;
  for (let i = 0; i < effect.lane.length; i++) hash = Math.imul(hash ^ effect.lane.charCodeAt(i), 0x01000193);
  return `${effect.tenant}:${effect.agent}:courier-${(hash >>> 0) % COURIER_SHARDS}`;
}

/**
 * Gives each courier its effects, in the order given (a lane's effects keep
 * their order), all couriers at once; those a courier did not take within
 * `timeoutMs` are `missed`. The pass and the queue consumer both hand over this way.
 */
export async function toCouriers(couriers: EffectCarriers["couriers"], effects: EffectMessage[], timeoutMs: number): Promise<{ taken: EffectMessage[]; missed: EffectMessage[] }> {
  const groups = new Map<string, EffectMessage[]>();
  for (const effect of effects) {
    const name = courierName(effect);
    const group = groups.get(name);
    if (group) group.push(effect);
    else groups.set(name, [effect]);
  }
  const taken: EffectMessage[] = [];
  const missed: EffectMessage[] = [];
  await Promise.all(
    [...groups].map(async ([name, group]) => {
      try {
        await withTimeout(couriers.get(couriers.idFromName(name)).take(group), timeoutMs);
        taken.push(...group);
      } catch (err) {
        console.warn(`${group.length} effects not taken by their courier (${err instanceof Error ? err.message : String(err)})`);
        missed.push(...group);
      }
    }),
  );
  return { taken, missed };
}

/**
 * Hands each effect to its courier, those a courier did not take to the
 * queue. Returns the effects on their way (all of them, unless the queue
 * refused too: the rest stay due, and the next pass tries again).
 */
async function handOff(carriers: EffectCarriers, effects: EffectMessage[]): Promise<Set<EffectMessage>> {
  const { taken, missed } = await toCouriers(carriers.couriers, effects, PASS_HAND_OFF_TIMEOUT_MS);
  const away = new Set(taken);
  if (missed.length === 0) return away;
  try {
    await carriers.queue.sendBatch(missed.map((body) => ({ body })));
    missed.forEach((effect) => away.add(effect));
  } catch (err) {
    console.error(`sending ${missed.length} effects failed; the next pass tries again`, err);
  }
  return away;
}

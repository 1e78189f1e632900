// Object busy time, recorded by the runtime itself: how long the AgentObject
// spends inside its handlers (each RPC, the alarm) and its passes, the time a
// Durable Object is billed for, split to the millisecond between the turns it
// served and a few named parts that served none (BusyPart), per hour, for the
// ledger. How the time is shared out: docs/models.md, "Object busy time".
import { ConversationRows } from "../../lib/conversation-rows.ts";
import { currentTurn } from "../store/index.ts";

export const HOUR_MS = 3_600_000;

/** Where busy time goes that served no turn. */
export type BusyPart = "pass" | "inbound" | "effects" | "reads" | "admin";

export interface TurnBusy {
  turn: number;
  busyMs: number;
  /** Handlers (passes included) whose time was counted to the turn. */
  handlers: number;
}

export interface HourBusy {
  /** Start of the hour, ms since the epoch (UTC). */
  hour: number;
  busyMs: number;
  passes: number;
  handlers: number;
  /** The part of busyMs that served no turn, by part. */
  outsideTurns: Partial<Record<BusyPart, number>>;
}

/** Where a handler's conversation is read, each from the room that owns it. */
export interface ConversationLookup {
  /** The conversation of an open effect. */
  effect(kind: string, id: string): string | undefined;
  /** The conversation of a model job, settled or not. */
  job(id: string): string | undefined;
  /** The conversation of a journaled tool call. */
  call(key: string): string | undefined;
}

/** One handler running: what its share of the clock goes to now, and what it has had so far. */
interface Running {
  /** A conversation (its turn), or null: the handler's own time. */
  on: string | null;
  spent: Map<string | null, number>;
  /** A pass: the conversations it advanced or sent effects for, which share its own time. */
  served: Set<string>;
  /** Where time goes that reaches no turn. */
  part: BusyPart;
}

export class BusyTime {
  private readonly running = new Set<Running>();
  private tick = 0;
  /** The pass under way: passes run one at a time (runtime/object/scheduler.ts). */
  private pass: Running | null = null;

  constructor(
    /** Null until the object has a schema (a read of an unused object records nothing). */
    private readonly sql: () => SqlStorage | null,
    private readonly lookup: ConversationLookup,
  ) {}

  /**
   * Runs a handler (`call`: a call into the object) or a pass and records its
   * share of the object's time: to the current turn of `conversation` when
   * there is one, else to `part`. A pass (`part` "pass": the scheduler's, or
   * the alarm that runs one) that joins a pass already under way adds its time
   * to that pass's.
   */
  async measure<T>(about: { conversation?: string; part: BusyPart }, fn: () => Promise<T>, call = true): Promise<T> {
    const isPass = about.part === "pass";
    if (isPass && this.pass) {
      try {
        return await fn();
      } finally {
        const sql = this.sql();
        // The alarm that joins a pass counts as a call and a pass; the scheduler's own measure inside it, as nothing more.
        if (sql && call) addToHour(sql, 0, true, true);
      }
    }
    this.advanceClock();
    const running: Running = { on: about.conversation ?? null, spent: new Map(), served: new Set(), part: about.part };
    this.running.add(running);
    if (isPass) this.pass = running;
    try {
      return await fn();
    } finally {
      this.advanceClock();
      this.running.delete(running);
      if (this.pass === running) this.pass = null;
      const sql = this.sql();
      if (sql) record(sql, running, isPass, call);
    }
  }

  /** Inside a pass: `fn`'s time goes to `conversation`'s turn, which also shares the pass's own time. */
  async serving<T>(conversation: string, fn: () => Promise<T>): Promise<T> {
    const pass = this.pass;
    if (!pass) return fn();
    this.advanceClock();
    pass.served.add(conversation);
    pass.on = conversation;
    try {
      return await fn();
    } finally {
      this.advanceClock();
      pass.on = null;
    }
  }

  /** Inside a pass: it did work for these conversations (sent or gave up their effects); they share its own time. */
  served(conversations: Iterable<string>): void {
    for (const conversation of conversations) this.pass?.served.add(conversation);
  }

  /** The clock since the last look, shared equally by the handlers running now. */
  private advanceClock(): void {
    const now = performance.now();
    const share = this.running.size > 0 ? (now - this.tick) / this.running.size : 0;
    for (const r of this.running) r.spent.set(r.on, (r.spent.get(r.on) ?? 0) + share);
    this.tick = now;
  }

  /** The conversation an open effect belongs to (a model job's also once it is settled). */
  conversationOf(kind: string, id: string): string | undefined {
    if (!this.sql()) return undefined;
    const effect = this.lookup.effect(kind, id);
    if (effect !== undefined || kind !== "model") return effect;
    return this.lookup.job(id);
  }

  /** The conversation of a journaled tool call. */
  conversationOfCall(key: string): string | undefined {
    return this.sql() ? this.lookup.call(key) : undefined;
  }

  /** Busy time per turn of a conversation, oldest first. */
  ofConversation(conversation: string): TurnBusy[] {
    const sql = this.sql();
    if (!sql) return [];
    return sql
      .exec<{ turn: number; busy_ms: number; handlers: number }>("SELECT turn, busy_ms, handlers FROM busy_turns WHERE conversation = ? ORDER BY turn", conversation)
      .toArray()
      .map((r) => ({ turn: r.turn, busyMs: round(r.busy_ms), handlers: r.handlers }));
  }

  /** A conversation's busy time in turns last counted to since `since` (ms). */
  ofConversationSince(conversation: string, since: number): number {
    return this.sql()?.exec<{ busy: number }>("SELECT COALESCE(SUM(busy_ms), 0) AS busy FROM busy_turns WHERE conversation = ? AND at >= ?", conversation, since).one().busy ?? 0;
  }

  /**
   * The hours to hand to the ledger (with a model job's claim): those grown
   * since they were last handed out, and the last two whatever they show (a
   * courier that lost them hands them again; the ledger keeps the larger total).
   */
  toShip(): HourBusy[] {
    const sql = this.sql();
    if (!sql) return [];
    const rows = sql
      .exec<HourRow>("SELECT hour, busy_ms, passes, handlers FROM busy_hours WHERE busy_ms > shipped_ms OR hour >= ? ORDER BY hour", hourOf(Date.now()) - HOUR_MS)
      .toArray();
    sql.exec("UPDATE busy_hours SET shipped_ms = busy_ms WHERE busy_ms > shipped_ms");
    if (rows.length === 0) return [];
    const parts = sql.exec<PartRow>("SELECT hour, part, busy_ms FROM busy_outside WHERE hour >= ?", rows[0]!.hour).toArray();
    return rows.map((r) => ({
      hour: r.hour,
      busyMs: round(r.busy_ms),
      passes: r.passes,
      handlers: r.handlers,
      outsideTurns: Object.fromEntries(parts.filter((p) => p.hour === r.hour).map((p) => [p.part, round(p.busy_ms)])),
    }));
  }

  /** Rows older than `keepMs` go (the ledger keeps the hours). */
  prune(keepMs: number): void {
    const sql = this.sql();
    if (!sql) return;
    const before = Date.now() - keepMs;
    sql.exec("DELETE FROM busy_turns WHERE at < ?", before);
    sql.exec("DELETE FROM busy_hours WHERE hour < ?", hourOf(before));
    sql.exec("DELETE FROM busy_outside WHERE hour < ?", hourOf(before));
  }
}

/** The busy time of one conversation's turns, as retention archives it (runtime/store/archive.ts). */
export function busyTurnRows(sql: SqlStorage): ConversationRows<"busy_turns"> {
  return new ConversationRows(sql, "busy_turns");
}

type HourRow = { hour: number; busy_ms: number; passes: number; handlers: number };
type PartRow = { hour: number; part: BusyPart; busy_ms: number };

/**
 * A handler's shares, written where they go, and their sum to the hour, in
 * one go: the turns and the parts always add up to the hour's busy time.
 */
function record(sql: SqlStorage, running: Running, isPass: boolean, call: boolean): void {
  const own = running.spent.get(null) ?? 0;
  const turns = new Map<string, number>();
  for (const [on, ms] of running.spent) if (on !== null) turns.set(on, ms);
  // A pass's own time goes to the conversations it served, in equal parts.
  const sharers = isPass ? [...running.served] : [];
  for (const conversation of sharers) turns.set(conversation, (turns.get(conversation) ?? 0) + own / sharers.length);
  let outside = sharers.length > 0 ? 0 : own;
  for (const [conversation, ms] of turns) if (!addToTurn(sql, conversation, ms)) outside += ms;
  if (outside > 0) {
    sql.exec(
      "INSERT INTO busy_outside (hour, part, busy_ms) VALUES (?, ?, ?) ON CONFLICT (hour, part) DO UPDATE SET busy_ms = busy_ms + excluded.busy_ms",
      hourOf(Date.now()),
      running.part,
      outside,
    );
  }
  addToHour(sql, [...running.spent.values()].reduce((sum, ms) => sum + ms, 0), isPass, call);
}

/** False when the conversation has no row (an event refused before it opened one): the time stays outside. */
function addToTurn(sql: SqlStorage, conversation: string, ms: number): boolean {
  const turn = currentTurn(sql, conversation);
  if (turn === undefined) return false;
  sql.exec(
    "INSERT INTO busy_turns (conversation, turn, busy_ms, handlers, at) VALUES (?, ?, ?, 1, ?) ON CONFLICT (conversation, turn) DO UPDATE SET busy_ms = busy_ms + excluded.busy_ms, handlers = handlers + 1, at = excluded.at",
    conversation,
    turn,
    ms,
    Date.now(),
  );
  return true;
}

function addToHour(sql: SqlStorage, ms: number, isPass: boolean, call: boolean): void {
  sql.exec(
    "INSERT INTO busy_hours (hour, busy_ms, passes, handlers) VALUES (?, ?, ?, ?) ON CONFLICT (hour) DO UPDATE SET busy_ms = busy_ms + excluded.busy_ms, passes = passes + excluded.passes, handlers = handlers + excluded.handlers",
    hourOf(Date.now()),
    ms,
    isPass ? 1 : 0,
    call ? 1 : 0,
  );
}

export function hourOf(ms: number): number {
  return Math.floor(ms / HOUR_MS) * HOUR_MS;
}

function round(ms: number): number {
  return Math.round(ms * 100) / 100;
}

type Handler = (...args: never[]) => Promise<unknown>;
/** Says which conversation a handler's call is about, from its arguments (undefined: none, or not known). */
type Attribution = (busy: BusyTime, ...args: never[]) => string | undefined;

/** What a handler's time goes to: the turn of the conversation it is about, when it is about one, else its part. */
interface HandlerMeter {
  part: BusyPart;
  about?: Attribution;
}

const ofToolCall = (busy: BusyTime, key: string) => busy.conversationOfCall(key);
const effect = (about: Attribution): HandlerMeter => ({ part: "effects", about });
const READ: HandlerMeter = { part: "reads" };

/**
 * The AgentObject's handlers and what each is about. Reads (the console's
 * looks, a follow's start) count to no turn, so a turn's busy time is the
 * work of the turn alone.
 */
export const AGENT_HANDLERS: Record<string, HandlerMeter> = {
  alarm: { part: "pass" },
  submit: { part: "inbound", about: (_busy, _route: unknown, event: { conversation: string }) => event.conversation },
  conversation: READ,
  conversations: READ,
  claim: effect((busy, _route: unknown, kind: string, id: string) => busy.conversationOf(kind, id)),
  progress: effect((busy, _route: unknown, id: string) => busy.conversationOf("model", id)),
  report: effect((busy, _route: unknown, kind: string, id: string) => busy.conversationOf(kind, id)),
  claimScriptCall: effect((busy, _route: unknown, call: { parentKey: string }) => ofToolCall(busy, call.parentKey)),
  reportScriptCall: effect((busy, _route: unknown, key: string) => ofToolCall(busy, key)),
  respond: { part: "inbound", about: (_busy, _route: unknown, _id: unknown, event: { conversation: string }) => event.conversation },
  cancelResponse: { part: "inbound" },
  feed: READ,
  fetch: READ,
  response: READ,
  conversationList: READ,
  pendingHolds: READ,
  changes: READ,
  applySettings: { part: "admin" },
  dropDeliveries: { part: "admin" },
};

/**
 * Wraps every handler of a Durable Object class on its prototype (the methods
 * RPC and the alarm call; its helpers are #private, off the prototype), so each
 * call is measured by the instance's `busyTime` as `meters` says (a handler
 * they do not name counts as "admin").
 */
export function measureHandlers(proto: { busyTime: BusyTime }, meters: Record<string, HandlerMeter>): void {
  const methods = proto as unknown as Record<string, Handler>;
  const names = Object.getOwnPropertyNames(proto).filter((name) => name !== "constructor" && typeof methods[name] === "function");
  for (const name of Object.keys(meters)) if (!names.includes(name)) throw new Error(`measureHandlers: no handler ${name}`);
  for (const name of names) {
    const original = methods[name]!;
    const { part, about } = meters[name] ?? { part: "admin" };
    const wrapped = function (this: { busyTime: BusyTime }, ...args: never[]): Promise<unknown> {
      const conversation = about?.(this.busyTime, ...args);
      return this.busyTime.measure({ part, ...(conversation !== undefined ? { conversation } : {}) }, () => original.apply(this, args));
    };
    Object.defineProperty(proto, name, { value: wrapped, writable: true, configurable: true });
  }
}

// Object busy time, recorded by the runtime itself: how long the AgentObject
// spends inside its handlers (each RPC, the alarm) and its passes (which a
// call starts in its background), the time a Durable Object is billed for.
// Each handler is wrapped once, here, on the class (measureHandlers), and the
// scheduler wraps each pass; nothing is timed line by line.
//
// Two sums are kept in the object's SQLite:
// - per conversation turn, where a handler is about one conversation (an
//   event, a courier's claim or report of one of its effects; inside a pass,
//   each conversation the pass advances): the handler's own time;
// - per hour, for the object as a whole: the time during which at least one
//   handler or pass ran (overlapping ones count once), with the number of
//   passes and of calls into the object (RPCs and alarms). The ledger is sent
//   these (runtime/metering/ledger.ts).
//
// The clock is the runtime's: on workerd it advances across I/O (storage,
// queue, RPC), not during pure computation, so busy time is wall time spent
// waiting inside handlers plus whatever the platform's clock shows of CPU.

export const HOUR_MS = 3_600_000;

/** A call into the object (an RPC, the alarm), a pass (started by a call or the alarm), or a part of a pass (one conversation). */
type BusyKind = "call" | "pass" | "part";

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
}

export class BusyTime {
  private active = 0;
  private since = 0;

  constructor(
    /** Null until the object has a schema (a read of an unused object records nothing). */
    private readonly sql: () => SqlStorage | null,
  ) {}

  /**
   * Runs a handler (a call into the object: an RPC or the alarm), a pass or a
   * part of one, and records its time: to the current turn of `conversation`
   * when there is one, and to the object's hour (only the outermost of
   * overlapping intervals is counted), with the calls and passes it saw.
   */
  async measure<T>(conversation: string | undefined, kind: BusyKind, fn: () => Promise<T>): Promise<T> {
    const start = performance.now();
    if (this.active++ === 0) this.since = start;
    try {
      return await fn();
    } finally {
      const end = performance.now();
      const sql = this.sql();
      const outermost = --this.active === 0;
      if (sql && conversation !== undefined) addToTurn(sql, conversation, end - start);
      if (sql && (outermost || kind !== "part")) addToHour(sql, outermost ? end - this.since : 0, kind);
    }
  }

  /** The conversation an open effect belongs to (a model job's also once it is settled). */
  conversationOf(kind: string, id: string): string | undefined {
    const sql = this.sql();
    if (!sql) return undefined;
    const effect = sql.exec<{ conversation: string }>("SELECT conversation FROM effects WHERE kind = ? AND id = ?", kind, id).toArray()[0];
    if (effect || kind !== "model") return effect?.conversation;
    return sql.exec<{ conversation: string }>("SELECT conversation FROM model_jobs WHERE id = ?", id).toArray()[0]?.conversation;
  }

  /** The conversation of a journaled tool call. */
  conversationOfCall(key: string): string | undefined {
    return this.sql()?.exec<{ conversation: string }>("SELECT conversation FROM tool_calls WHERE key = ?", key).toArray()[0]?.conversation;
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
    return rows.map(hourBusy);
  }

  /** Rows older than `keepMs` go (the ledger keeps the hours). */
  prune(keepMs: number): void {
    const sql = this.sql();
    if (!sql) return;
    const before = Date.now() - keepMs;
    sql.exec("DELETE FROM busy_turns WHERE at < ?", before);
    sql.exec("DELETE FROM busy_hours WHERE hour < ?", hourOf(before));
  }
}

type HourRow = { hour: number; busy_ms: number; passes: number; handlers: number };

function hourBusy(r: HourRow): HourBusy {
  return { hour: r.hour, busyMs: round(r.busy_ms), passes: r.passes, handlers: r.handlers };
}

function addToTurn(sql: SqlStorage, conversation: string, ms: number): void {
  const turn = sql.exec<{ turn: number }>("SELECT turn FROM conversations WHERE id = ?", conversation).toArray()[0]?.turn;
  if (turn === undefined) return;
  sql.exec(
    "INSERT INTO busy_turns (conversation, turn, busy_ms, handlers, at) VALUES (?, ?, ?, 1, ?) ON CONFLICT (conversation, turn) DO UPDATE SET busy_ms = busy_ms + excluded.busy_ms, handlers = handlers + 1, at = excluded.at",
    conversation,
    turn,
    ms,
    Date.now(),
  );
}

function addToHour(sql: SqlStorage, ms: number, kind: BusyKind): void {
  sql.exec(
    "INSERT INTO busy_hours (hour, busy_ms, passes, handlers) VALUES (?, ?, ?, ?) ON CONFLICT (hour) DO UPDATE SET busy_ms = busy_ms + excluded.busy_ms, passes = passes + excluded.passes, handlers = handlers + excluded.handlers",
    hourOf(Date.now()),
    ms,
    kind === "pass" ? 1 : 0,
    kind === "call" ? 1 : 0,
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

const ofToolCall = (busy: BusyTime, key: string) => busy.conversationOfCall(key);

/**
 * What the AgentObject's handlers are about, where one is about a
 * conversation; the others (reads: a watcher polling a conversation) are
 * counted to the hour but to no turn, so a turn's busy time is the work of
 * the turn alone.
 */
export const AGENT_HANDLERS: Record<string, Attribution> = {
  submit: (_busy, _route: unknown, event: { conversation: string }) => event.conversation,
  claim: (busy, _route: unknown, kind: string, id: string) => busy.conversationOf(kind, id),
  progress: (busy, _route: unknown, id: string) => busy.conversationOf("model", id),
  report: (busy, _route: unknown, kind: string, id: string) => busy.conversationOf(kind, id),
  claimScriptCall: (busy, _route: unknown, call: { parentKey: string }) => ofToolCall(busy, call.parentKey),
  reportScriptCall: (busy, _route: unknown, key: string) => ofToolCall(busy, key),
};

/**
 * Wraps every handler of a Durable Object class on its prototype (the methods
 * RPC and the alarm call), so each call is measured by the instance's
 * `busyTime`, and counted to the conversation `attributions` names for it.
 */
export function measureHandlers(proto: { busyTime: BusyTime }, attributions: Record<string, Attribution>): void {
  const methods = proto as unknown as Record<string, Handler>;
  const names = Object.getOwnPropertyNames(proto).filter((name) => name !== "constructor" && typeof methods[name] === "function");
  for (const name of Object.keys(attributions)) if (!names.includes(name)) throw new Error(`measureHandlers: no handler ${name}`);
  for (const name of names) {
    const original = methods[name]!;
    const attribute = attributions[name] ?? (() => undefined);
    const wrapped = function (this: { busyTime: BusyTime }, ...args: never[]): Promise<unknown> {
      return this.busyTime.measure(attribute(this.busyTime, ...args), "call", () => original.apply(this, args));
    };
    Object.defineProperty(proto, name, { value: wrapped, writable: true, configurable: true });
  }
}

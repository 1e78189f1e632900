// The conversation store: the conversations projection, the append-only log a
// conversation is folded from, the inbox of messages waiting for the running
// turn's next model call, and the ids of every inbound event accepted.
import type { Audience } from "../../plugins/index.ts";
import type { ChatUser, ReplyAddress, Route } from "../chat.ts";
import { ConversationRows } from "../../lib/conversation-rows.ts";
import { MESSAGE_TYPES, type LogRow, type LogType, type UserData } from "./transcript.ts";

const MESSAGE_TYPES_SQL = [...MESSAGE_TYPES].map((type) => `'${type}'`).join(", ");

export type ConversationRow = {
  id: string;
  status: "idle" | "running" | "failed";
  turn: number;
  reply_to: string | null;
  started_by: string;
  error: string | null;
  input_tokens: number;
  output_tokens: number;
  cost: number;
  created_at: number;
  updated_at: number;
  /** Set while its rows live in R2 (runtime/store/archive.ts): a message restores them first. */
  archived_at: number | null;
};

/**
 * What waits in the inbox for the running turn: a person's message (steering)
 * or a runtime note. Messages queued behind the turn wait there too, as
 * `queued` rows that only the turn's end takes (queueBehind, takeQueued).
 */
export type InboxItem = { type: "user"; data: UserData } | { type: "marker"; data: { text: string } };

/** Who started a turn: a person, or the runtime (a decided hold wakes the agent); a compaction has a purpose instead. */
export type TurnStart = { by: ChatUser | { runtime: true } } | { purpose: "compact" };

/** Whether a conversation is one person's direct messages, by the bridge that started it (its ChatOutbound's isDirect). */
export type DirectRule = (by: ChatUser, address: ReplyAddress | null, route: Route) => boolean;

/** The conversation's current turn; undefined when it has no row. */
export function currentTurn(sql: SqlStorage, conversation: string): number | undefined {
  return sql.exec<{ turn: number }>("SELECT turn FROM conversations WHERE id = ?", conversation).toArray()[0]?.turn;
}

/** The log of one conversation, as retention archives it (runtime/store/archive.ts). */
export function logRows(sql: SqlStorage): ConversationRows<"log"> {
  return new ConversationRows(sql, "log");
}

/** Log rows by seq (the feed's events: runtime/feed/feed.ts); a seq no longer in the log is left out. */
export function logRowsAt(sql: SqlStorage, seqs: readonly number[]): Map<number, LogRow> {
  if (seqs.length === 0) return new Map();
  return new Map(sql.exec<LogRow>("SELECT * FROM log WHERE seq IN (SELECT value FROM json_each(?))", JSON.stringify(seqs)).toArray().map((row) => [row.seq, row]));
}

export class Conversations {
  constructor(
    private readonly sql: SqlStorage,
    /** What a DM is, by the bridge that started a conversation (the object asks its bridges); none: no DMs. */
    private readonly direct: DirectRule = () => false,
  ) {}

  /**
   * Who can read the conversation: one person in a direct message (whoever
   * started it: nobody else can write in it), or the workspace's channels.
   * Plugins such as memory scope what they keep by it, so a note made in a DM
   * never reaches a channel.
   */
  audienceOf(route: Route, conv: ConversationRow): Audience {
    const by = JSON.parse(conv.started_by) as ChatUser;
    const address = conv.reply_to ? (JSON.parse(conv.reply_to) as ReplyAddress) : null;
    return this.direct(by, address, route) ? { kind: "dm", person: `${by.platform}:${by.id}` } : { kind: "channel" };
  }

  get(id: string): ConversationRow | undefined {
    return this.sql.exec<ConversationRow>("SELECT * FROM conversations WHERE id = ?", id).toArray()[0];
  }

  create(id: string, startedBy: ChatUser, now: number): ConversationRow {
    this.sql.exec(
      "INSERT INTO conversations (id, status, turn, started_by, created_at, updated_at) VALUES (?, 'idle', 0, ?, ?, ?)",
      id,
      JSON.stringify(startedBy),
      now,
      now,
    );
    return this.get(id)!;
  }

  /** Conversations whose id starts with `prefix`, most recently updated first. */
  list(prefix: string, limit: number): ConversationRow[] {
    return this.sql
      .exec<ConversationRow>("SELECT * FROM conversations WHERE substr(id, 1, ?) = ? ORDER BY updated_at DESC LIMIT ?", prefix.length, prefix, limit)
      .toArray();
  }

  /** An event, a reply or a decision reached it: the next pass advances it. */
  markForPass(id: string): void {
    this.sql.exec("UPDATE conversations SET pass_due = 1 WHERE id = ?", id);
  }

  /** The conversations the next pass must advance; taking them clears their mark. */
  takeMarked(): string[] {
    const ids = this.sql.exec<{ id: string }>("SELECT id FROM conversations WHERE pass_due = 1").toArray().map((r) => r.id);
    this.sql.exec("UPDATE conversations SET pass_due = 0 WHERE pass_due = 1");
    return ids;
  }

  anyMarked(): boolean {
    return this.sql.exec("SELECT 1 FROM conversations WHERE pass_due = 1 LIMIT 1").toArray().length > 0;
  }

  /** The running conversations and the turn each runs. */
  runningTurns(): { id: string; turn: number }[] {
    return this.sql.exec<{ id: string; turn: number }>("SELECT id, turn FROM conversations WHERE status = 'running'").toArray();
  }

  runningIds(): string[] {
    return this.sql.exec<{ id: string }>("SELECT id FROM conversations WHERE status = 'running'").toArray().map((r) => r.id);
  }

  replyAddress(conv: ConversationRow): ReplyAddress | null {
    return conv.reply_to ? (JSON.parse(conv.reply_to) as ReplyAddress) : null;
  }

  setReplyTo(id: string, address: ReplyAddress): void {
    this.sql.exec("UPDATE conversations SET reply_to = ? WHERE id = ?", JSON.stringify(address), id);
  }

  /** Opens turn `turn + 1` and returns its number. */
  beginTurn(conv: ConversationRow, start: TurnStart): number {
    const turn = conv.turn + 1;
    this.sql.exec("UPDATE conversations SET status = 'running', turn = ?, error = NULL, pass_due = 1, updated_at = ? WHERE id = ?", turn, Date.now(), conv.id);
    this.append(conv.id, turn, "turn_start", start);
    return turn;
  }

  finishTurn(id: string, status: "idle" | "failed", error: string | null): void {
    this.sql.exec("UPDATE conversations SET status = ?, error = ?, updated_at = ? WHERE id = ?", status, error, Date.now(), id);
  }

  /** Something the conversation's people should know went wrong after its turn (a message given up): the console shows it as its error. */
  noteError(id: string, error: string): void {
    this.sql.exec("UPDATE conversations SET error = ?, updated_at = ? WHERE id = ?", error, Date.now(), id);
  }

  addUsage(id: string, inputTokens: number, outputTokens: number, cost: number): void {
    this.sql.exec(
      "UPDATE conversations SET input_tokens = input_tokens + ?, output_tokens = output_tokens + ?, cost = cost + ?, updated_at = ? WHERE id = ?",
      inputTokens,
      outputTokens,
      cost,
      Date.now(),
      id,
    );
  }

  /** True while `conv`'s turn is the conversation's running turn. */
  stillRunning(conv: ConversationRow): boolean {
    const now = this.get(conv.id);
    return now?.status === "running" && now.turn === conv.turn;
  }

  // ---- the log ----------------------------------------------------------------

  append(conversation: string, turn: number, type: LogType, data: unknown): void {
    this.sql.exec("INSERT INTO log (conversation, turn, type, data, at) VALUES (?, ?, ?, ?, ?)", conversation, turn, type, JSON.stringify(data), Date.now());
  }

  /** Every row, oldest first: what the transcript view shows. A turn reads its `tail` instead. */
  log(conversation: string): LogRow[] {
    return this.sql.exec<LogRow>("SELECT * FROM log WHERE conversation = ? ORDER BY seq", conversation).toArray();
  }

  /**
   * What a turn reads of the log: the rows from the last handover's kept tail
   * on, and from the current turn's start on, whichever begins earlier (the
   * whole log before the first compaction). Every fold on a turn's path (the
   * model's messages, the estimate, compaction, the standing documents) needs
   * nothing older, so a turn costs the same however long the log has grown.
   */
  tail(conv: ConversationRow): LogRow[] {
    const handover = this.sql
      .exec<{ keep_from: number }>(
        "SELECT COALESCE(json_extract(data, '$.keepFrom'), seq) AS keep_from FROM log WHERE conversation = ? AND type = 'handover' ORDER BY seq DESC LIMIT 1",
        conv.id,
      )
      .toArray()[0];
    const from = Math.min(handover?.keep_from ?? 0, conv.turn > 0 ? this.turnStart(conv).seq : Infinity);
    return this.sql.exec<LogRow>("SELECT * FROM log WHERE conversation = ? AND seq >= ? ORDER BY seq", conv.id, from).toArray();
  }

  /** The newest row the model is shown or told of (a message, a note, a handover). */
  lastMessage(conversation: string): LogRow | undefined {
    return this.sql.exec<LogRow>(`SELECT * FROM log WHERE conversation = ? AND type IN (${MESSAGE_TYPES_SQL}) ORDER BY seq DESC LIMIT 1`, conversation).toArray()[0];
  }

  /** Whether the turn said, after the assistant message at `seq`, that it waits for the caller's function outputs (an `awaiting` row). */
  awaitingSince(conversation: string, seq: number): boolean {
    return this.sql.exec<{ n: number }>("SELECT EXISTS (SELECT 1 FROM log WHERE conversation = ? AND seq > ? AND type = 'awaiting') AS n", conversation, seq).one().n === 1;
  }

  /** Whether a person steered `conv`'s current turn (wrote to it while it ran). */
  steeredInTurn(conv: ConversationRow): boolean {
    // From the turn's start on (log_turn_starts, then log_by_conversation): the turn's rows alone, however long the conversation.
    return (
      this.sql
        .exec<{ steered: number }>(
          `SELECT EXISTS (SELECT 1 FROM log WHERE conversation = ?1 AND seq > (SELECT seq FROM log WHERE conversation = ?1 AND turn = ?2 AND type = 'turn_start')
             AND type = 'user' AND json_extract(data, '$.steer') = 1) AS steered`,
          conv.id,
          conv.turn,
        )
        .one().steered === 1
    );
  }

  /** The model's replies in `conv`'s current turn (a child run's step limit counts them). */
  repliesInTurn(conv: ConversationRow): number {
    return this.sql.exec<{ n: number }>("SELECT COUNT(*) AS n FROM log WHERE conversation = ? AND turn = ? AND type = 'assistant'", conv.id, conv.turn).one().n;
  }

  /** The first log row of `conv`'s current turn: where it starts, and how. */
  turnStart(conv: ConversationRow): { seq: number; start: TurnStart } {
    const row = this.sql
      .exec<{ seq: number; data: string }>("SELECT seq, data FROM log WHERE conversation = ? AND turn = ? AND type = 'turn_start'", conv.id, conv.turn)
      .one();
    return { seq: row.seq, start: JSON.parse(row.data) as TurnStart };
  }

  // ---- the inbox ----------------------------------------------------------------

  queue(conversation: string, item: InboxItem): void {
    this.sql.exec("INSERT INTO inbox (conversation, type, data, at) VALUES (?, ?, ?, ?)", conversation, item.type, JSON.stringify(item.data), Date.now());
  }

  /** Everything waiting for the running turn, oldest first, removed from the inbox. */
  drain(conversation: string): InboxItem[] {
    const items = this.sql
      .exec<{ type: InboxItem["type"]; data: string }>("SELECT type, data FROM inbox WHERE conversation = ? AND type != 'queued' ORDER BY seq", conversation)
      .toArray()
      .map((row) => ({ type: row.type, data: JSON.parse(row.data) }) as InboxItem);
    this.sql.exec("DELETE FROM inbox WHERE conversation = ? AND type != 'queued'", conversation);
    return items;
  }

  /** The oldest item waiting for the running turn, removed from the inbox. */
  takeFirst(conversation: string): InboxItem | undefined {
    const row = this.sql
      .exec<{ seq: number; type: InboxItem["type"]; data: string }>(
        "SELECT seq, type, data FROM inbox WHERE conversation = ? AND type != 'queued' ORDER BY seq LIMIT 1",
        conversation,
      )
      .toArray()[0];
    if (!row) return undefined;
    this.sql.exec("DELETE FROM inbox WHERE seq = ?", row.seq);
    return { type: row.type, data: JSON.parse(row.data) } as InboxItem;
  }

  /** A person's message answered only after the running turn (the `queue` strategy). */
  queueBehind(conversation: string, data: UserData): void {
    this.sql.exec("INSERT INTO inbox (conversation, type, data, at) VALUES (?, 'queued', ?, ?)", conversation, JSON.stringify(data), Date.now());
  }

  /** The messages queued behind the turn that just ended, oldest first, removed from the inbox. */
  takeQueued(conversation: string): UserData[] {
    const rows = this.sql.exec<{ data: string }>("SELECT data FROM inbox WHERE conversation = ? AND type = 'queued' ORDER BY seq", conversation).toArray();
    this.sql.exec("DELETE FROM inbox WHERE conversation = ? AND type = 'queued'", conversation);
    return rows.map((row) => JSON.parse(row.data) as UserData);
  }

  // ---- inbound event ids ----------------------------------------------------------

  /** Records an inbound event id; false when it was seen before (a platform retry). */
  recordInbound(eventId: string, conversation: string, kind: string): boolean {
    if (this.sql.exec("SELECT 1 FROM inbound WHERE event_id = ?", eventId).toArray().length > 0) return false;
    this.sql.exec("INSERT INTO inbound (event_id, conversation, kind, at) VALUES (?, ?, ?, ?)", eventId, conversation, kind, Date.now());
    return true;
  }
}

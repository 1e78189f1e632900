// The outbox: chat messages written in the same transaction as the state that
// produced them, sent per conversation in order, in runs a courier sends and
// reports at once; a rate-limited row waits out the platform's word, a row
// refused for good is given up and its conversation told (docs/design.md,
// "The outbox").
import { type DeliveryResult, type OutboundMessage, type OutboxDelivery, type Platform, type ReplyAddress, type Route, type StreamShown, outboundFor, type RuntimeDeps } from "../chat.ts";
import type { Effects } from "./effects.ts";
import { ConversationRows } from "../../lib/conversation-rows.ts";

/** Failures other than rate limits (the platform's own errors, no answer) before a row is given up. */
const MAX_ATTEMPTS = 10;
/** Rows one courier sends in a run. */
const MAX_RUN = 10;

/** A row of a run: its delivery, which row it is, and the ref key it shares with the other states of its message. */
export type RunDelivery = OutboxDelivery & { row: number; refKey: string | null };

/** What a courier sends for a send effect: a conversation's rows in order, and its bridge's update spacing. */
export interface SendRun {
  deliveries: RunDelivery[];
  /** The least time between two changes of the conversation's messages updated in place (ChatOutbound.updateSpacingMs). */
  spacingMs: number;
  /** When the conversation's last such message was posted or updated, if ever. */
  lastPacedAt: number | null;
}

/** The platform's answers for a run, in order; rows after the first one held back (a rate limit, a timeout) are not in it. */
export type RunResults = { row: number; result: DeliveryResult }[];

type Row = {
  id: number;
  conversation: string;
  address: string;
  message: string;
  ref_key: string | null;
  status: "pending" | "sent" | "failed";
  attempts: number;
  created_at: number;
  /** The head of the run an earlier dispatch carried it in, while its outcome is not known: it may have been posted. */
  run: number | null;
};

/** The outbox's rows of one conversation, as retention archives them (runtime/store/archive.ts). */
export function outboxRows(sql: SqlStorage): ConversationRows<"outbox"> {
  return new ConversationRows(sql, "outbox");
}

export class Outbox {
  private readonly sql: SqlStorage;

  constructor(
    storage: DurableObjectStorage,
    private readonly objectId: string,
    private readonly deps: RuntimeDeps,
    private readonly effects: Effects,
    /** A row given up: its conversation's record says why (the console shows it). */
    private readonly undelivered: (conversation: string, error: string) => void,
  ) {
    this.sql = storage.sql;
  }

  /** The conversations with a message waiting to be sent (retention keeps them: runtime/store/archive.ts). */
  openConversations(): Set<string> {
    return new Set(this.sql.exec<{ conversation: string }>("SELECT DISTINCT conversation FROM outbox WHERE status = 'pending'").toArray().map((row) => row.conversation));
  }

  /** Deletes settled rows written before `before`, at most `limit`; how many went. */
  pruneSettled(before: number, limit: number): number {
    return this.sql.exec("DELETE FROM outbox WHERE id IN (SELECT id FROM outbox WHERE status != 'pending' AND created_at < ? LIMIT ?) RETURNING 1", before, limit).toArray().length;
  }

  /**
   * A reply is split into the platform's messages. A message updated in place
   * (a turn's status, a card) has a ref key: only its latest state matters, so
   * it replaces the conversation's last waiting row when that is an earlier
   * state of it that has not left the object, never a row already under way.
   */
  post(conversation: string, address: ReplyAddress, message: OutboundMessage, refKey: string | null): void {
    if (message.kind === "reply") {
      // A reply's ref key is that of the message it was streamed to: its first part finishes that message, the rest are new.
      const parts = outboundFor(this.deps, address.platform)?.split(message.text) ?? [message.text];
      parts.forEach((text, i) => this.insert(conversation, address, { kind: "reply", text }, i === 0 ? refKey : null));
    } else if (refKey) {
      this.latestState(conversation, address, message, refKey);
    } else {
      this.insert(conversation, address, message, null);
    }
    this.release(conversation);
  }

  /**
   * A turn's answer in place of its status message (`statusKey`), where the
   * platform shows it there (ChatOutbound.answersInStatus), it fits one
   * message, and no other message (a card, a notice) was written since the
   * status (the answer would read above it): it is the status's last state,
   * so it replaces a state of it not yet sent like any later state would.
   * False: nothing was written, the answer goes as a reply of its own.
   */
  answerInStatus(conversation: string, address: ReplyAddress, text: string, statusKey: string): boolean {
    const outbound = outboundFor(this.deps, address.platform);
    const parts = outbound?.answersInStatus?.(address) ? outbound.split(text) : [];
    if (parts.length !== 1 || !this.lastWritten(conversation, statusKey)) return false;
    this.latestState(conversation, address, { kind: "reply", text: parts[0]! }, statusKey);
    this.release(conversation);
    return true;
  }

  /** Whether only states of `refKey`'s message were written to the conversation since its first: it is still the last message. */
  private lastWritten(conversation: string, refKey: string): boolean {
    // The first row by outbox_by_ref; the rows after it by id (`+conversation` keeps the planner on that range): the turn's, not the conversation's.
    const since = "SELECT MIN(id) FROM outbox WHERE conversation = ?1 AND ref_key = ?2";
    return this.sql.exec<{ n: number }>(`SELECT COUNT(*) AS n FROM outbox WHERE id > (${since}) AND +conversation = ?1 AND ref_key IS NOT ?2`, conversation, refKey).one().n === 0;
  }

  /** A state of a message updated in place: it replaces the conversation's last waiting row when that is an earlier state of it not under way. */
  private latestState(conversation: string, address: ReplyAddress, message: OutboundMessage, refKey: string): void {
    const last = this.sql
      .exec<{ id: number; ref_key: string | null; run: number | null }>("SELECT id, ref_key, run FROM outbox WHERE conversation = ? AND status = 'pending' ORDER BY id DESC LIMIT 1", conversation)
      .toArray()[0];
    if (last && last.ref_key === refKey && last.run === null) {
      this.sql.exec("UPDATE outbox SET message = ? WHERE id = ?", JSON.stringify(message), last.id);
    } else {
      this.insert(conversation, address, message, refKey);
    }
  }

  /** Whether a platform's replies can be streamed (its bridge's outbound streams). */
  canStream(address: ReplyAddress): boolean {
    return outboundFor(this.deps, address.platform)?.stream !== undefined;
  }

  /** A streamed reply's message, as its courier reported it: a later report replaces an earlier one. */
  recordStream(refKey: string, { ref, shown }: StreamShown): void {
    this.sql.exec(
      "INSERT INTO message_refs (ref_key, ref, shown) VALUES (?, ?, ?) ON CONFLICT (ref_key) DO UPDATE SET ref = excluded.ref, shown = excluded.shown",
      refKey,
      ref,
      shown,
    );
  }

  /** The message a ref key names, and what it shows when it is a streamed reply's. */
  refOf(refKey: string): { ref: string; shown?: string } | undefined {
    const row = this.sql.exec<{ ref: string; shown: string | null }>("SELECT ref, shown FROM message_refs WHERE ref_key = ?", refKey).toArray()[0];
    return row && { ref: row.ref, ...(row.shown !== null ? { shown: row.shown } : {}) };
  }

  private insert(conversation: string, address: ReplyAddress, message: OutboundMessage, refKey: string | null): void {
    this.sql.exec(
      "INSERT INTO outbox (conversation, address, message, ref_key, status, created_at) VALUES (?, ?, ?, ?, 'pending', ?)",
      conversation,
      JSON.stringify(address),
      JSON.stringify(message),
      refKey,
      Date.now(),
    );
  }

  /** Hands the conversation's first unsent row to a courier, unless it already has it. */
  private release(conversation: string): void {
    const head = this.sql
      .exec<Pick<Row, "id" | "address" | "ref_key" | "message">>("SELECT id, address, ref_key, message FROM outbox WHERE conversation = ? AND status = 'pending' ORDER BY id LIMIT 1", conversation)
      .toArray()[0];
    if (head) this.effects.add("send", String(head.id), conversation, this.paced(conversation, head));
  }

  /**
   * When a run may go: one that starts with an update of a message already
   * posted waits until the platform's spacing has passed since the
   * conversation's last post or update of such a message (it stays waiting,
   * so `post` can still replace it). A reply never waits: it is what the
   * person waits for, and it ends its message's changes (one per turn).
   */
  private paced(conversation: string, head: Pick<Row, "address" | "ref_key" | "message">): number {
    const now = Date.now();
    if (!head.ref_key || !this.refOf(head.ref_key) || (JSON.parse(head.message) as OutboundMessage).kind === "reply") return now;
    const spacing = outboundFor(this.deps, (JSON.parse(head.address) as ReplyAddress).platform)?.updateSpacingMs ?? 0;
    const last = this.lastPacedAt(conversation);
    return spacing <= 0 || last === null ? now : Math.max(now, last + spacing);
  }

  private lastPacedAt(conversation: string): number | null {
    return this.sql.exec<{ at: number | null }>("SELECT MAX(sent_at) AS at FROM outbox WHERE conversation = ? AND status = 'sent' AND ref_key IS NOT NULL", conversation).one().at;
  }

  /**
   * The run a send effect carries: its head row and the rows waiting behind
   * it, or null once the head is settled. A row an earlier dispatch carried
   * may have reached the platform without its answer reaching us
   * (`uncertain`), so the bridge looks for the message before sending it again.
   */
  run(route: Route, head: number): SendRun | null {
    const first = this.sql.exec<Row>("SELECT * FROM outbox WHERE id = ?", head).toArray()[0];
    if (!first || first.status !== "pending") return null;
    const rows = this.sql
      .exec<Row>("SELECT * FROM outbox WHERE conversation = ? AND status = 'pending' AND id >= ? ORDER BY id LIMIT ?", first.conversation, head, MAX_RUN)
      .toArray();
    const lifetime = this.lifetime();
    const deliveries = rows.map((row) => ({ ...this.delivery(route, row, lifetime, row.run !== null), row: row.id, refKey: row.ref_key }));
    this.sql.exec("UPDATE outbox SET run = ? WHERE id IN (SELECT value FROM json_each(?))", head, JSON.stringify(rows.map((row) => row.id)));
    const platform = (JSON.parse(first.address) as ReplyAddress).platform;
    return { deliveries, spacingMs: outboundFor(this.deps, platform)?.updateSpacingMs ?? 0, lastPacedAt: this.lastPacedAt(first.conversation) };
  }

  /**
   * This storage's own name, random, made once: row ids start again at 1 when
   * an object's state is reset, and a key of object and row alone would then
   * repeat (Discord would take the new message for the one it made with that
   * nonce minutes before, and swallow it).
   */
  private lifetime(): string {
    this.sql.exec("INSERT OR IGNORE INTO meta (key, value) VALUES ('outbox_lifetime', lower(hex(randomblob(8))))");
    return this.sql.exec<{ value: string }>("SELECT value FROM meta WHERE key = 'outbox_lifetime'").one().value;
  }

  private delivery(route: Route, row: Row, lifetime: string, uncertain: boolean): OutboxDelivery {
    const known = row.ref_key ? this.refOf(row.ref_key) : undefined;
    return {
      route,
      conversation: row.conversation,
      address: JSON.parse(row.address) as ReplyAddress,
      message: JSON.parse(row.message) as OutboundMessage,
      idempotencyKey: `${this.objectId}:${lifetime}:${row.id}`,
      createdAt: row.created_at,
      ref: known?.ref,
      ...(known?.shown !== undefined ? { shown: known.shown } : {}),
      uncertain,
    };
  }

  /**
   * A run's answers: each row sent, retried later, or given up; the rows it
   * carried but did not report wait for the next run. False when the run was
   * settled already (a second report).
   */
  settle(head: number, results: RunResults): boolean {
    if (!this.effects.get("send", String(head))) return false;
    this.effects.done("send", String(head));
    // Rows the run carried but the courier never tried are in no doubt.
    this.sql.exec("UPDATE outbox SET run = NULL WHERE run = ? AND id NOT IN (SELECT value ->> 'row' FROM json_each(?))", head, JSON.stringify(results));
    for (const { row: id, result } of results) {
      const row = this.sql.exec<Row>("SELECT * FROM outbox WHERE id = ? AND run = ?", id, head).toArray()[0];
      if (!row || row.status !== "pending") continue;
      if (!this.settleRow(row, result)) return true; // held back: it goes again first
    }
    const conversation = this.sql.exec<{ conversation: string }>("SELECT conversation FROM outbox WHERE id = ?", head).toArray()[0]?.conversation;
    if (conversation !== undefined) this.release(conversation);
    return true;
  }

  /** One row's answer; false when it is to be tried again (the run stops there). */
  private settleRow(row: Row, result: DeliveryResult): boolean {
    if (!result.ok && result.retryAfterMs !== undefined && result.permanent !== true) {
      // A rate limit is a wait, not an attempt; and a refusal: nothing was posted, so it leaves the next attempt no doubt to clear up (no read-back).
      const at = Date.now() + result.retryAfterMs;
      this.sql.exec("UPDATE outbox SET error = ?, run = NULL WHERE id = ?", result.error, row.id);
      this.effects.add("send", String(row.id), row.conversation, at);
      this.effects.retryAt("send", String(row.id), at, false);
      return false;
    }
    const attempts = row.attempts + 1;
    if (result.ok) {
      this.sql.exec("UPDATE outbox SET status = 'sent', attempts = ?, ref = ?, sent_at = ?, run = NULL WHERE id = ?", attempts, result.ref ?? null, Date.now(), row.id);
      if (row.ref_key && result.ref) this.sql.exec("INSERT OR IGNORE INTO message_refs (ref_key, ref) VALUES (?, ?)", row.ref_key, result.ref);
      return true;
    }
    this.sql.exec("UPDATE outbox SET attempts = ?, error = ? WHERE id = ?", attempts, result.error, row.id);
    if (result.permanent === true || attempts >= MAX_ATTEMPTS) {
      this.fail(row, result.error, result.unreachable === true);
      return true;
    }
    const delay = Math.min(60_000, 1000 * 2 ** (attempts - 1));
    this.effects.add("send", String(row.id), row.conversation, Date.now() + delay);
    this.effects.retryAt("send", String(row.id), Date.now() + delay);
    return false;
  }

  /** A row whose couriers never answered (its leases ran out) is given up, and the next one goes. */
  giveUp(id: number): void {
    const row = this.sql.exec<Row>("SELECT * FROM outbox WHERE id = ?", id).toArray()[0];
    if (row?.status !== "pending") return;
    this.fail(row, "the platform did not answer in time", true);
    this.release(row.conversation);
  }

  /**
   * Every unsent row to `platform` fails with `reason`, none tried again (the
   * app was removed from the tenant's workspace). A courier under way with one
   * finds its report ignored. Returns how many rows failed.
   */
  failPending(platform: Platform, reason: string): number {
    const rows = this.sql
      .exec<Row>("SELECT * FROM outbox WHERE status = 'pending' ORDER BY id")
      .toArray()
      .filter((row) => (JSON.parse(row.address) as ReplyAddress).platform === platform);
    for (const row of rows) {
      this.sql.exec("UPDATE outbox SET status = 'failed', error = ? WHERE id = ?", reason, row.id);
      this.effects.done("send", String(row.id));
    }
    if (rows.length > 0) console.error(`outbox: ${rows.length} rows to ${platform} failed for good: ${reason}`);
    return rows.length;
  }

  /**
   * The row is given up, and its conversation told: its record (the console)
   * always; its thread too, with a notice, unless nothing more can be posted
   * there or the row was itself a notice (one refused notice never makes another).
   */
  private fail(row: Row, error: string, unreachable = false): void {
    this.sql.exec("UPDATE outbox SET status = 'failed', error = ?, run = NULL WHERE id = ?", error, row.id);
    const address = JSON.parse(row.address) as ReplyAddress;
    console.error(`outbox ${row.id} to ${address.platform} failed for good: ${error}`);
    this.undelivered(row.conversation, `a message could not be delivered to ${address.platform}: ${error}`);
    if (unreachable || (JSON.parse(row.message) as OutboundMessage).kind === "notice") return;
    this.insert(row.conversation, address, { kind: "notice", text: `⚠️ A message in this conversation could not be delivered (${error}).` }, null);
  }
}

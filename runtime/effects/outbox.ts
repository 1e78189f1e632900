// The outbox: chat messages written in the same transaction as the state that
// produced them. Each conversation's rows go out in order: only its first
// unsent row is handed to a courier (as an effect), and the next is released
// when that one is reported sent or given up. A rate-limited row waits out the
// platform's Retry-After; other conversations' rows do not wait for it. An
// update of a message changed in place is paced to the platform's spacing.
import { type DeliveryResult, type OutboundMessage, type OutboxDelivery, type Platform, type ReplyAddress, type Route, type StreamShown, outboundFor, type RuntimeDeps } from "../chat.ts";
import type { Effects } from "./effects.ts";

const MAX_ATTEMPTS = 10;

type Row = {
  id: number;
  conversation: string;
  address: string;
  message: string;
  ref_key: string | null;
  status: "pending" | "sent" | "failed";
  attempts: number;
  created_at: number;
};

export class Outbox {
  private readonly sql: SqlStorage;

  constructor(
    storage: DurableObjectStorage,
    private readonly objectId: string,
    private readonly deps: RuntimeDeps,
    private readonly effects: Effects,
  ) {
    this.sql = storage.sql;
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
      const last = this.sql
        .exec<{ id: number; ref_key: string | null }>("SELECT id, ref_key FROM outbox WHERE conversation = ? AND status = 'pending' ORDER BY id DESC LIMIT 1", conversation)
        .toArray()[0];
      if (last && last.ref_key === refKey && !this.effects.inFlight("send", String(last.id))) {
        this.sql.exec("UPDATE outbox SET message = ? WHERE id = ?", JSON.stringify(message), last.id);
      } else {
        this.insert(conversation, address, message, refKey);
      }
    } else {
      this.insert(conversation, address, message, null);
    }
    this.release(conversation);
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
      .exec<Pick<Row, "id" | "address" | "ref_key">>("SELECT id, address, ref_key FROM outbox WHERE conversation = ? AND status = 'pending' ORDER BY id LIMIT 1", conversation)
      .toArray()[0];
    if (head) this.effects.add("send", String(head.id), conversation, this.paced(conversation, head));
  }

  /**
   * When a row may go: an update of a message already posted waits until the
   * platform's spacing has passed since the conversation's last post or update
   * of such a message (it stays waiting, so `post` can still replace it).
   */
  private paced(conversation: string, head: Pick<Row, "address" | "ref_key">): number {
    const now = Date.now();
    if (!head.ref_key || !this.refOf(head.ref_key)) return now;
    const spacing = outboundFor(this.deps, (JSON.parse(head.address) as ReplyAddress).platform)?.updateSpacingMs ?? 0;
    if (spacing <= 0) return now;
    const last = this.sql
      .exec<{ at: number | null }>("SELECT MAX(sent_at) AS at FROM outbox WHERE conversation = ? AND status = 'sent' AND ref_key IS NOT NULL", conversation)
      .one().at;
    return last === null ? now : Math.max(now, last + spacing);
  }

  /**
   * A courier's claim of a row: what to send. `uncertain` says an earlier claim
   * may have reached the platform without its answer reaching us, so the
   * bridge looks for the message before sending it again.
   */
  claim(route: Route, id: number): OutboxDelivery | null {
    const row = this.sql.exec<Row>("SELECT * FROM outbox WHERE id = ?", id).toArray()[0];
    if (!row || row.status !== "pending") return null;
    const claim = this.effects.claim("send", String(id));
    if (!claim) return null;
    const known = row.ref_key ? this.refOf(row.ref_key) : undefined;
    return {
      route,
      conversation: row.conversation,
      address: JSON.parse(row.address) as ReplyAddress,
      message: JSON.parse(row.message) as OutboundMessage,
      idempotencyKey: `${this.objectId}:${row.id}`,
      createdAt: row.created_at,
      ref: known?.ref,
      ...(known?.shown !== undefined ? { shown: known.shown } : {}),
      uncertain: claim.earlierClaims > 0,
    };
  }

  /** The platform's answer for a row: sent (the next row goes), retried later, or given up; false when the row was settled already. */
  settle(id: number, result: DeliveryResult): boolean {
    const row = this.sql.exec<Row>("SELECT * FROM outbox WHERE id = ?", id).toArray()[0];
    if (!row || row.status !== "pending") return false;
    const attempts = row.attempts + 1;
    if (result.ok) {
      this.sql.exec("UPDATE outbox SET status = 'sent', attempts = ?, ref = ?, sent_at = ? WHERE id = ?", attempts, result.ref ?? null, Date.now(), id);
      if (row.ref_key && result.ref) this.sql.exec("INSERT OR IGNORE INTO message_refs (ref_key, ref) VALUES (?, ?)", row.ref_key, result.ref);
      this.finish(row);
      return true;
    }
    this.sql.exec("UPDATE outbox SET attempts = ?, error = ? WHERE id = ?", attempts, result.error, id);
    if (result.permanent === true || attempts >= MAX_ATTEMPTS) {
      this.fail(row, result.error);
      return true;
    }
    // A rate limit is a refusal: nothing was posted, so it leaves the next claim no doubt to clear up (no read-back).
    if (result.retryAfterMs !== undefined) this.effects.refused("send", String(id));
    const delay = result.retryAfterMs ?? Math.min(60_000, 1000 * 2 ** (attempts - 1));
    this.effects.retryAt("send", String(id), Date.now() + delay);
    return true;
  }

  /** A row whose couriers never answered (its leases ran out) is given up, and the next one goes. */
  giveUp(id: number): void {
    const row = this.sql.exec<Row>("SELECT * FROM outbox WHERE id = ?", id).toArray()[0];
    if (row?.status === "pending") this.fail(row, "the platform did not answer in time");
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

  private fail(row: Row, error: string): void {
    this.sql.exec("UPDATE outbox SET status = 'failed', error = ? WHERE id = ?", error, row.id);
    console.error(`outbox ${row.id} to ${(JSON.parse(row.address) as ReplyAddress).platform} failed for good: ${error}`);
    this.finish(row);
  }

  private finish(row: Row): void {
    this.effects.done("send", String(row.id));
    this.release(row.conversation);
  }
}

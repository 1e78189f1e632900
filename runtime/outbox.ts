// The outbox: chat messages written in the same transaction as the state that
// produced them, sent in order per conversation, retried after the platform's
// Retry-After or with backoff, and marked sent when the platform answers.
import type { OutboundMessage, ReplyAddress, Route } from "./chat.ts";
import { outboundFor, type RuntimeDeps } from "./deps.ts";

const MAX_ATTEMPTS = 10;

type Row = {
  id: number;
  conversation: string;
  address: string;
  ref_key: string | null;
  attempts: number;
  next_at: number;
};

export class Outbox {
  private readonly sql: SqlStorage;
  /** Rows whose delivery is awaited now: an update must not be merged into them. */
  private readonly sending = new Set<number>();

  constructor(
    private readonly storage: DurableObjectStorage,
    private readonly objectId: string,
    private readonly deps: RuntimeDeps,
  ) {
    this.sql = storage.sql;
  }

  /**
   * A reply is split into the platform's messages. A message updated in place
   * (a turn's status, a card) has a ref key: only its latest state matters, so
   * it replaces the conversation's last waiting row when that is an earlier
   * state of it (rate-limited or not yet tried), never a row being sent now.
   */
  post(conversation: string, address: ReplyAddress, message: OutboundMessage, refKey: string | null): void {
    const now = Date.now();
    if (refKey) {
      const last = this.sql
        .exec<{ id: number; ref_key: string | null }>("SELECT id, ref_key FROM outbox WHERE conversation = ? AND status = 'pending' ORDER BY id DESC LIMIT 1", conversation)
        .toArray()[0];
      if (last && last.ref_key === refKey && !this.sending.has(last.id)) {
        this.sql.exec("UPDATE outbox SET message = ? WHERE id = ?", JSON.stringify(message), last.id);
      } else {
        this.insert(conversation, address, message, refKey, now);
      }
      return;
    }
    const parts = message.kind === "reply" ? (outboundFor(this.deps, address.platform)?.split(message.text) ?? [message.text]) : [message];
    for (const part of parts) this.insert(conversation, address, typeof part === "string" ? { kind: "reply", text: part } : part, null, now);
  }

  private insert(conversation: string, address: ReplyAddress, message: OutboundMessage, refKey: string | null, now: number): void {
    this.sql.exec(
      "INSERT INTO outbox (conversation, address, message, ref_key, status, next_at, created_at) VALUES (?, ?, ?, ?, 'pending', ?, ?)",
      conversation,
      JSON.stringify(address),
      JSON.stringify(message),
      refKey,
      now,
      now,
    );
  }

  /** Sends due rows in order; a conversation whose row fails waits, so order holds. */
  async flush(env: Env, route: Route): Promise<void> {
    const now = Date.now();
    const rows = this.sql.exec<Row>("SELECT id, conversation, address, ref_key, attempts, next_at FROM outbox WHERE status = 'pending' ORDER BY id").toArray();
    const blocked = new Set<string>();
    for (const row of rows) {
      if (blocked.has(row.conversation)) continue;
      if (row.next_at > now) {
        blocked.add(row.conversation);
        continue;
      }
      // Re-read: an update may have replaced this row's message while earlier rows were sent.
      const current = this.sql.exec<{ message: string; status: string }>("SELECT message, status FROM outbox WHERE id = ?", row.id).one();
      if (current.status !== "pending") continue;
      const address = JSON.parse(row.address) as ReplyAddress;
      const outbound = outboundFor(this.deps, address.platform);
      if (!outbound) {
        this.sql.exec("UPDATE outbox SET status = 'failed', error = ? WHERE id = ?", `no bridge for platform ${address.platform}`, row.id);
        continue;
      }
      const ref = row.ref_key ? this.sql.exec<{ ref: string }>("SELECT ref FROM message_refs WHERE ref_key = ?", row.ref_key).toArray()[0]?.ref : undefined;
      let result;
      this.sending.add(row.id);
      try {
        result = await outbound.deliver(env, {
          route,
          conversation: row.conversation,
          address,
          message: JSON.parse(current.message) as OutboundMessage,
          idempotencyKey: `${this.objectId}:${row.id}`,
          ref,
        });
      } catch (err) {
        result = { ok: false as const, error: err instanceof Error ? err.message : String(err) };
      } finally {
        this.sending.delete(row.id);
      }
      const attempts = row.attempts + 1;
      if (result.ok) {
        this.storage.transactionSync(() => {
          this.sql.exec("UPDATE outbox SET status = 'sent', attempts = ?, ref = ?, sent_at = ? WHERE id = ?", attempts, result.ref ?? null, Date.now(), row.id);
          if (row.ref_key && result.ref && !ref) this.sql.exec("INSERT OR IGNORE INTO message_refs (ref_key, ref) VALUES (?, ?)", row.ref_key, result.ref);
        });
        continue;
      }
      const giveUp = result.permanent === true || attempts >= MAX_ATTEMPTS;
      const delay = result.retryAfterMs ?? Math.min(60_000, 1000 * 2 ** (attempts - 1));
      this.sql.exec(
        "UPDATE outbox SET status = ?, attempts = ?, next_at = ?, error = ? WHERE id = ?",
        giveUp ? "failed" : "pending",
        attempts,
        Date.now() + delay,
        result.error,
        row.id,
      );
      if (giveUp) console.error(`outbox ${row.id} to ${address.platform} failed for good: ${result.error}`);
      else blocked.add(row.conversation);
    }
  }

  /** When the next row is due. Rows wait behind their conversation's first one, so only the heads count. */
  nextDue(): number | null {
    return this.sql
      .exec<{ at: number | null }>(
        "SELECT MIN(next_at) AS at FROM outbox o WHERE status = 'pending' AND id = (SELECT MIN(id) FROM outbox p WHERE p.conversation = o.conversation AND p.status = 'pending')",
      )
      .one().at;
  }
}

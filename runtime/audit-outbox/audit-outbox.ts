// The audit outbox: what a person changes from a chat (a stop, a compact, an
// approval or a denial clicked on a card) becomes a row here, written in the
// same transaction as the event that made the change, and an `audit` effect
// carries it to the tenant's trail in the control plane. The row's id is the
// trail's dedupe key: a platform's retry is one event (inbound keeps event
// ids), a courier's retry one row, and a row is never given up.
import type { ChatEvent, Route, SubmitResult } from "../chat.ts";
import type { AuditEntry } from "../control/index.ts";
import type { Effects } from "../effects/index.ts";

/** What an audit effect carries: the entry, with its key. */
export type AuditWork = AuditEntry & { key: string };

/** How long a row whose couriers never answered waits before it is sent again. */
const RESEND_MS = 60_000;

export class AuditOutbox {
  constructor(
    private readonly sql: SqlStorage,
    private readonly effects: Effects,
  ) {}

  /**
   * Run in the event's transaction, with what inbound made of it. Events that
   * came through /v1 or the console are recorded by the gate
   * (runtime/access/audit.ts), with the key or person who called.
   */
  record(route: Route, event: ChatEvent, result: SubmitResult): void {
    if (!result.accepted || event.user.platform === "api" || event.user.platform === "console") return;
    const change = changeOf(event, result);
    if (!change) return;
    const subject = `agents/${route.agent}/conversations/${event.conversation}${change.hold ? `/holds/${change.hold}` : ""}`;
    const entry: AuditEntry = { tenant: route.tenant, actor: `${event.user.platform}:${event.user.team ?? route.tenant}:${event.user.id}`, action: change.action, subject, before: null, after: change.after };
    const id = crypto.randomUUID();
    this.sql.exec("INSERT INTO audit_outbox (id, conversation, entry, created_at) VALUES (?, ?, ?, ?)", id, event.conversation, JSON.stringify(entry), Date.now());
    this.effects.add("audit", id, event.conversation);
  }

  work(id: string): AuditWork | null {
    const row = this.sql.exec<{ entry: string }>("SELECT entry FROM audit_outbox WHERE id = ?", id).toArray()[0];
    return row ? { ...(JSON.parse(row.entry) as AuditEntry), key: id } : null;
  }

  /** The row is in the trail; false when it was reported before. */
  report(id: string): boolean {
    this.effects.done("audit", id);
    return this.sql.exec("DELETE FROM audit_outbox WHERE id = ?", id).rowsWritten > 0;
  }

  /** Its couriers never answered: it goes again later, for a change must not leave the trail. */
  giveUp(id: string): void {
    const row = this.sql.exec<{ conversation: string }>("SELECT conversation FROM audit_outbox WHERE id = ?", id).toArray()[0];
    if (row) this.effects.add("audit", id, row.conversation, Date.now() + RESEND_MS);
  }
}

/** The change an accepted event made, if it made one: `status` only reads, and a click that decided nothing changed nothing. */
function changeOf(event: ChatEvent, result: SubmitResult): { action: string; after: unknown; hold?: string } | null {
  switch (event.kind) {
    case "interrupt":
      return { action: "conversation.stop", after: { status: result.status, notice: result.notice ?? null } };
    case "command":
      return event.command === "status" ? null : { action: `conversation.${event.command}`, after: { status: result.status, notice: result.notice ?? null } };
    case "decision":
      if (result.decided !== true || !result.card) return null;
      return { action: event.approve ? "approval.approve" : "approval.deny", hold: event.holdId, after: { state: result.card.state, tool: result.card.tool } };
    default:
      return null;
  }
}

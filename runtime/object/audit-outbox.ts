// The audit outbox: what a person changes in a conversation from a chat or
// the console (a stop, a compact, an approval or a denial) becomes a row here, written in the
// same transaction as the event that made the change, and an `audit` effect
// carries it to the tenant's trail in its own object. The row's id is the
// trail's dedupe key: a platform's retry is one event (inbound keeps event
// ids), a courier's retry one row, and a row is never given up.
import type { ChatEvent, ChatUser, Route, SubmitResult } from "../chat.ts";
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
    /** A stop or a command where there is no conversation changed nothing (and inbound created none). */
    private readonly conversationExists: (conversation: string) => boolean,
  ) {}

  /**
   * Run in the event's transaction, with what inbound made of it. An event
   * sent through /v1 names its caller (`key:<id>`, `platform:admin-token`):
   * the row is theirs, and a decision they pass on for a named approver
   * says so (`approver`). One without a caller is not recorded.
   */
  record(route: Route, event: ChatEvent, result: SubmitResult, caller?: string): void {
    if (!result.accepted || (event.user.platform === "api" && caller === undefined) || !this.conversationExists(event.conversation)) return;
    const change = changeOf(event, result);
    if (!change) return;
    const subject = `agents/${route.agent}/conversations/${event.conversation}${change.hold ? `/holds/${change.hold}` : ""}`;
    const after = caller !== undefined && event.kind === "decision" ? { ...(change.after as object), approver: actorOf(route, event.user) } : change.after;
    const entry: AuditEntry = { tenant: route.tenant, actor: caller ?? actorOf(route, event.user), action: change.action, subject, before: null, after };
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

/** A person as the trail names them: `slack:<team>:<user>`, `discord:<guild>:<user>`, the console's own `console:admin`. */
function actorOf(route: Route, user: ChatUser): string {
  return user.platform === "console" ? `console:${user.id}` : `${user.platform}:${user.team ?? route.tenant}:${user.id}`;
}

/** The change an accepted event made, if it made one: `status` only reads, and a click that decided nothing changed nothing. */
function changeOf(event: ChatEvent, result: SubmitResult): { action: string; after: unknown; hold?: string } | null {
  switch (event.kind) {
    case "interrupt":
      return { action: "conversation.stop", after: { conversation: event.conversation, status: result.status, notice: result.notice ?? null } };
    case "command":
      return event.command === "status" ? null : { action: `conversation.${event.command}`, after: { conversation: event.conversation, status: result.status, notice: result.notice ?? null } };
    case "decision":
      if (result.decided !== true || !result.card) return null;
      return { action: event.approve ? "hold.approve" : "hold.deny", hold: event.holdId, after: { hold: event.holdId, decision: event.approve ? "approve" : "deny", state: result.card.state, tool: result.card.tool } };
    default:
      return null;
  }
}

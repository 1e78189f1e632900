// Holds: a call that waits for a person. Recorded verbatim with who asked and
// where; decided once (a single SQL transition from "pending"); performed at
// most once; expired lazily, so no timer is armed while the agent is idle.
import * as z from "zod";
import { ConversationRows } from "../lib/conversation-rows.ts";

/** running = approved and being performed; an eviction mid-call finds it so. */
/** performed/failed: the call was made, and answered with a result or an error. */
export type HoldStatus = "pending" | "approved" | "running" | "denied" | "expired" | "performed" | "failed" | "refused" | "unknown";

export type HoldRow = {
  id: string;
  conversation: string;
  call_key: string;
  tool: string;
  args: string;
  requested_by: string;
  /** The person whose message started the turn that made the call (JSON { platform, id }); null for a turn the runtime started. */
  requester: string | null;
  status: HoldStatus;
  created_at: number;
  expires_at: number;
  decided_by: string | null;
  decided_at: number | null;
  outcome: string | null;
};

export type SettledStatus = "performed" | "failed" | "refused" | "unknown";

/** The holds of one conversation, as retention archives them (runtime/store/archive.ts). */
export function holdRows(sql: SqlStorage): ConversationRows<"holds"> {
  return new ConversationRows(sql, "holds");
}

export class Holds {
  constructor(private readonly sql: SqlStorage) {}

  create(input: { conversation: string; callKey: string; tool: string; args: unknown; requestedBy: string; requester: Person | null; ttlMs: number }): HoldRow {
    const existing = this.byCallKey(input.callKey);
    if (existing) return existing;
    const now = Date.now();
    const id = `h${crypto.randomUUID().replaceAll("-", "").slice(0, 16)}`;
    this.sql.exec(
      "INSERT INTO holds (id, conversation, call_key, tool, args, requested_by, requester, status, created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?, 'pending', ?, ?)",
      id,
      input.conversation,
      input.callKey,
      input.tool,
      JSON.stringify(input.args ?? {}),
      input.requestedBy,
      input.requester ? JSON.stringify({ platform: input.requester.platform, id: input.requester.id }) : null,
      now,
      now + input.ttlMs,
    );
    return this.get(id)!;
  }

  get(id: string): HoldRow | undefined {
    return this.sql.exec<HoldRow>("SELECT * FROM holds WHERE id = ?", id).toArray()[0];
  }

  withIds(ids: readonly string[]): HoldRow[] {
    return ids.length === 0 ? [] : this.sql.exec<HoldRow>(`SELECT * FROM holds WHERE id IN (${ids.map(() => "?").join(", ")})`, ...ids).toArray();
  }

  ofConversation(conversation: string): HoldRow[] {
    return this.sql.exec<HoldRow>("SELECT * FROM holds WHERE conversation = ? ORDER BY created_at", conversation).toArray();
  }

  byCallKey(callKey: string): HoldRow | undefined {
    return this.sql.exec<HoldRow>("SELECT * FROM holds WHERE call_key = ?", callKey).toArray()[0];
  }

  pending(conversation?: string): HoldRow[] {
    return conversation === undefined
      ? this.sql.exec<HoldRow>("SELECT * FROM holds WHERE status = 'pending' ORDER BY created_at").toArray()
      : this.sql.exec<HoldRow>("SELECT * FROM holds WHERE status = 'pending' AND conversation = ? ORDER BY created_at", conversation).toArray();
  }

  /** Whether a hold of the conversation waits for a decision or is still to be performed. */
  isOpen(conversation: string): boolean {
    return this.sql.exec("SELECT 1 FROM holds WHERE conversation = ? AND status IN ('pending', 'approved', 'running') LIMIT 1", conversation).toArray().length > 0;
  }

  /** The open holds and their states ("id:status,…" by id; null: none), of one conversation or all: a decision or a settlement changes it. */
  openStates(conversation?: string): string | null {
    const and = conversation === undefined ? "" : " AND conversation = ?";
    return this.sql
      .exec<{ v: string | null }>(
        `SELECT group_concat(id || ':' || status) AS v FROM (SELECT id, status FROM holds WHERE status IN ('pending', 'approved', 'running')${and} ORDER BY id)`,
        ...(conversation === undefined ? [] : [conversation]),
      )
      .one().v;
  }

  /** The conversations with a hold waiting for a decision or still to be performed (retention keeps them: runtime/store/archive.ts). */
  openConversations(): Set<string> {
    return new Set(
      this.sql.exec<{ conversation: string }>("SELECT DISTINCT conversation FROM holds WHERE status IN ('pending', 'approved', 'running')").toArray().map((row) => row.conversation),
    );
  }

  /** Approved holds not yet settled, including one cut short mid-call. */
  toPerform(): HoldRow[] {
    return this.sql.exec<HoldRow>("SELECT * FROM holds WHERE status IN ('approved', 'running') ORDER BY decided_at").toArray();
  }

  /** The one transition out of "pending": returns false when another decision got there first. */
  decide(id: string, status: "approved" | "denied" | "expired", by: string | null, at: number, outcome: string | null): boolean {
    return (
      this.sql.exec(
        "UPDATE holds SET status = ?, decided_by = ?, decided_at = ?, outcome = ? WHERE id = ? AND status = 'pending'",
        status,
        by,
        at,
        outcome,
        id,
      ).rowsWritten > 0
    );
  }

  markRunning(id: string): void {
    this.sql.exec("UPDATE holds SET status = 'running' WHERE id = ? AND status = 'approved'", id);
  }

  settle(id: string, status: SettledStatus, outcome: string): void {
    this.sql.exec("UPDATE holds SET status = ?, outcome = ? WHERE id = ? AND status = 'running'", status, outcome, id);
  }
}

/** APPROVERS: tenant → user ids, each bare ("U123") or bound to a platform ("slack:U123"). */
export const approversSchema = z.record(z.string(), z.array(z.string()));

export interface Person {
  platform: string;
  id: string;
}

/**
 * A listed approver of the tenant, or the person who asked: the one whose
 * message started the turn that made the call (never a bystander who merely
 * spoke first in the channel).
 */
export function mayDecide(person: Person, approvers: readonly string[], requester: Person | null): boolean {
  const listed = approvers.some((entry) => entry === person.id || entry === `${person.platform}:${person.id}`);
  const asked = requester !== null && requester.platform === person.platform && requester.id === person.id;
  return listed || asked;
}

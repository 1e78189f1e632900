// Leases: what a leased mount (a machine) holds for a conversation, and when it
// ends. A lease opens when a courier claims a call of such a mount and is
// renewed by each call's report. It ends (the plugin's `retire`, an effect a
// courier performs in the conversation's tool lane, after any call before it)
// at the first pass that finds the conversation with nothing open (no running
// turn, no hold waiting or being performed), or once it has gone without a
// call for its idle limit; 5 minutes before that, the model is told at its
// next step, and may postpone once. A call that ends it (`release`) closes it
// at once. An open lease keeps the object's alarm for its warning and its
// end: an agent with a machine is not idle; one with none arms nothing.
import type { Holds } from "../../approvals/index.ts";
import type { Mount } from "../../plugins/index.ts";
import type { Effects } from "../effects/index.ts";
import type { Conversations } from "../store/index.ts";
import type { PassContext } from "../pass-context.ts";

/** The model is told this long before its machine is destroyed for being idle. */
export const IDLE_WARNING_MS = 5 * 60_000;

/** What a courier needs to end a lease: the mount as it was last used (so an unmounted one still ends) and the conversation. */
export interface LeaseWork {
  mount: Mount;
  conversation: string;
}

/** A lease's end as its courier reports it: done, or why not (it is tried again). */
export interface LeaseReport {
  error?: string;
}

/** How a call of a leased mount bears on its lease, as the courier that performed it says. */
export interface LeaseUse {
  conversation: string;
  act: "use" | "end" | "postpone";
}

type LeaseRow = { alias: string; conversation: string; mount: string; idle_ms: number; expires_at: number; postponed: number; warned: number; state: "open" | "ending" };

/** Retried this long after a failed end (the backend could not be reached). */
const END_RETRY_MS = 30_000;

export class Leases {
  constructor(
    private readonly sql: SqlStorage,
    private readonly effects: Effects,
    /** Whose turn runs, and whose holds are open: a conversation with neither has nothing open. */
    private readonly conversations: Conversations,
    private readonly holds: Holds,
    /** Tells the model at its next step (runtime/turns' note). */
    private readonly note: (conversation: string, text: string) => void,
  ) {}

  /** A courier claimed a call: of a leased mount, its lease opens (or is renewed), before anything runs. */
  claimed(pass: PassContext, work: { tool: string; scope: { conversation: string } }): void {
    const lease = pass.gateway.leaseOf(work.tool);
    const idleMs = pass.machineIdleMs;
    if (!lease || lease.ends || lease.postpones || idleMs === null) return;
    const conversation = work.scope.conversation;
    this.sql.exec(
      `INSERT INTO leases (alias, conversation, mount, idle_ms, expires_at, postponed, warned, state) VALUES (?, ?, ?, ?, ?, 0, 0, 'open')
       ON CONFLICT (alias, conversation) DO UPDATE SET mount = excluded.mount, idle_ms = excluded.idle_ms, expires_at = excluded.expires_at, warned = 0, state = 'open'`,
      lease.mount.alias,
      conversation,
      JSON.stringify(lease.mount),
      idleMs,
      Date.now() + idleMs,
    );
  }

  /** A call's report: a use renews the lease, a release closes it, a postpone extends it once by its length. */
  reported(alias: string, use: LeaseUse): void {
    const row = this.row(alias, use.conversation);
    if (!row || row.state !== "open") return;
    if (use.act === "end") {
      this.sql.exec("DELETE FROM leases WHERE alias = ? AND conversation = ?", alias, use.conversation);
    } else if (use.act === "use") {
      this.sql.exec("UPDATE leases SET expires_at = ?, warned = 0 WHERE alias = ? AND conversation = ?", Date.now() + row.idle_ms, alias, use.conversation);
    } else if (row.postponed === 0) {
      this.sql.exec("UPDATE leases SET expires_at = expires_at + idle_ms, postponed = 1, warned = 0 WHERE alias = ? AND conversation = ?", alias, use.conversation);
    }
  }

  /**
   * At each pass: leases whose conversation has nothing open, or whose idle
   * limit is reached, end; those within the warning tell the model, once.
   */
  sweep(now = Date.now()): void {
    const rows = this.sql
      .exec<LeaseRow>("SELECT * FROM leases WHERE state = 'open'")
      .toArray()
      .map((row) => ({ ...row, busy: this.conversations.get(row.conversation)?.status === "running" || this.holds.isOpen(row.conversation) }));
    for (const row of rows) {
      if (!row.busy || row.expires_at <= now) this.end(row);
      else if (row.warned === 0 && row.expires_at - IDLE_WARNING_MS <= now) {
        this.sql.exec("UPDATE leases SET warned = 1 WHERE alias = ? AND conversation = ?", row.alias, row.conversation);
        this.note(row.conversation, warning(row, now));
      }
    }
  }

  /** The conversations holding a lease, open or ending (retention keeps them: runtime/store/archive.ts). */
  openConversations(): Set<string> {
    return new Set(this.sql.exec<{ conversation: string }>("SELECT DISTINCT conversation FROM leases").toArray().map((row) => row.conversation));
  }

  /** When the alarm must next look at leases: the earliest warning or end. */
  nextDue(): number | null {
    return this.sql.exec<{ at: number | null }>("SELECT MIN(CASE warned WHEN 0 THEN expires_at - ? ELSE expires_at END) AS at FROM leases WHERE state = 'open'", IDLE_WARNING_MS).one().at;
  }

  /** The work of a lease being ended, or null when it is no longer (the effect ends). */
  work(id: string): LeaseWork | null {
    const { alias, conversation } = parseId(id);
    const row = this.row(alias, conversation);
    return row?.state === "ending" ? { mount: JSON.parse(row.mount) as Mount, conversation } : null;
  }

  /** The courier's word: ended (the lease goes), or not (tried again soon). A second report changes nothing. */
  report(id: string, outcome: LeaseReport): boolean {
    if (!this.effects.get("lease", id)) return false;
    const { alias, conversation } = parseId(id);
    const ending = this.row(alias, conversation)?.state === "ending";
    if (ending && outcome.error) {
      console.warn(`lease ${alias} of ${conversation} could not be ended (${outcome.error}); again in ${END_RETRY_MS / 1000} s`);
      this.effects.retryAt("lease", id, Date.now() + END_RETRY_MS);
      return true;
    }
    // A lease opened again meanwhile (a call since) is the next machine's: it stays.
    if (ending) this.sql.exec("DELETE FROM leases WHERE alias = ? AND conversation = ?", alias, conversation);
    this.effects.done("lease", id);
    return true;
  }

  /** No courier ended it in time: it is dropped, and said (the backend's own limits end a machine left behind). */
  giveUp(id: string): void {
    const { alias, conversation } = parseId(id);
    console.error(`lease ${alias} of ${conversation}: no courier ended it before the deadline; what it held is left to the backend's own limits`);
    this.sql.exec("DELETE FROM leases WHERE alias = ? AND conversation = ? AND state = 'ending'", alias, conversation);
  }

  /** Leases not yet ended (one ending is still open until its courier reports), for `status`. */
  open(): { alias: string; conversation: string; expiresAt: number }[] {
    return this.sql
      .exec<Pick<LeaseRow, "alias" | "conversation" | "expires_at">>("SELECT alias, conversation, expires_at FROM leases ORDER BY expires_at")
      .toArray()
      .map((row) => ({ alias: row.alias, conversation: row.conversation, expiresAt: row.expires_at }));
  }

  private end(row: LeaseRow): void {
    this.sql.exec("UPDATE leases SET state = 'ending' WHERE alias = ? AND conversation = ?", row.alias, row.conversation);
    this.effects.add("lease", `${row.alias}:${row.conversation}`, row.conversation);
  }

  private row(alias: string, conversation: string): LeaseRow | undefined {
    return this.sql.exec<LeaseRow>("SELECT * FROM leases WHERE alias = ? AND conversation = ?", alias, conversation).toArray()[0];
  }
}

/** An alias has no ':' (mountSchema), so the first one splits the effect's id. */
function parseId(id: string): { alias: string; conversation: string } {
  const at = id.indexOf(":");
  return { alias: id.slice(0, at), conversation: id.slice(at + 1) };
}

function warning(row: LeaseRow, now: number): string {
  const minutes = Math.max(1, Math.round((row.expires_at - now) / 60_000));
  const idle = Math.round(row.idle_ms / 60_000);
  const choice =
    row.postponed === 0
      ? `Call ${row.alias}__postpone to keep it ${idle} minutes longer (once), or ${row.alias}__release if you are done with it.`
      : `It was postponed once already; call ${row.alias}__release if you are done with it.`;
  return `[Machine "${row.alias}" has had no call for a while: it will be destroyed in ${minutes} minute${minutes === 1 ? "" : "s"} (its processes ended, its files removed but for its kept folders). ${choice}]`;
}

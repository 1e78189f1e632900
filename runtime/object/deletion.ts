// Deleting an agent (DELETE /v1/tenants/{tenant}/agents/{agent}): in one
// transaction of its own object, a durable flag is set, every running turn is
// stopped (its model jobs discarded, its open calls closed), every hold still
// waiting or approved is settled unperformed, and each conversation touched is
// told in its chat through the outbox. From then on the object takes no step:
// a pass advances nothing and performs nothing (the outbox still delivers what
// was written, the farewell included), events are refused and reads answer
// nothing (the API's 404).
import { cardFor, type HoldRow } from "../../approvals/index.ts";
import type { Route } from "../chat.ts";
import type { Effects } from "../effects/index.ts";
import type { Conversations } from "../store/index.ts";
import type { ApprovalFlow } from "../tools/index.ts";
import type { Turns } from "../turns/index.ts";

/** The meta row holding when the agent was deleted. */
const DELETED_KEY = "deleted_at";
const FAREWELL = "This agent was deleted: it has stopped and will not answer here again.";
const NOT_PERFORMED = "Not performed: the agent was deleted.";
/** A call a courier was performing when the agent was deleted: its report will not be heard. */
const CUT_SHORT = "Outcome unknown: the agent was deleted while it was being performed.";

/** What the object answers to an event after its deletion (runtime/edge/ingress.ts makes it a 404). */
export class AgentDeletedError extends Error {
  override name = "AgentDeletedError";
}

export interface DeletionReport {
  deletedAt: number;
  /** Turns that were running and were stopped. */
  stopped: number;
  /** Holds settled unperformed. */
  holdsSettled: number;
  /** Conversations told in their chat (those with a chat to tell). */
  told: number;
}

export interface DeletionParts {
  storage: DurableObjectStorage;
  store: Conversations;
  turns: Turns;
  approvals: ApprovalFlow;
  effects: Effects;
}

export class AgentDeletion {
  private readonly sql: SqlStorage;

  constructor(private readonly parts: DeletionParts) {
    this.sql = parts.storage.sql;
  }

  deletedAt(): number | null {
    const row = this.sql.exec<{ value: string }>("SELECT value FROM meta WHERE key = ?", DELETED_KEY).toArray()[0];
    return row ? Number(row.value) : null;
  }

  /** Throws for a deleted agent: it takes no event. */
  refuseIfDeleted(route: Route): void {
    const at = this.deletedAt();
    if (at !== null) throw new AgentDeletedError(`agent "${route.agent}" of tenant "${route.tenant}" was deleted (${new Date(at).toISOString()}); it takes no messages`);
  }

  /** Deletes the agent; a second call changes nothing and reports the first. */
  delete(route: Route): DeletionReport {
    const { storage, store, turns, approvals } = this.parts;
    return storage.transactionSync(() => {
      const already = this.deletedAt();
      if (already !== null) return { deletedAt: already, stopped: 0, holdsSettled: 0, told: 0 };
      const now = Date.now();
      this.sql.exec("INSERT INTO meta (key, value) VALUES (?, ?)", DELETED_KEY, String(now));
      const running = store.runningIds();
      for (const id of running) turns.interrupt(id);
      const holds = [...approvals.holds.pending(), ...approvals.holds.toPerform()];
      for (const hold of holds) this.settleUnperformed(route, hold, now);
      const touched = [...new Set([...running, ...holds.map((h) => h.conversation)])];
      let told = 0;
      for (const id of touched) {
        const conv = store.get(id);
        if (!conv || !store.replyAddress(conv)) continue;
        turns.post(id, { kind: "notice", text: FAREWELL });
        told++;
      }
      return { deletedAt: now, stopped: running.length, holdsSettled: holds.length, told };
    });
  }

  /** Settled without telling the agent (a note would start a turn): its card shows why. One being performed is "unknown", not "refused". */
  private settleUnperformed(route: Route, hold: HoldRow, now: number): void {
    const { approvals, effects, turns } = this.parts;
    if (hold.status === "pending") approvals.holds.decide(hold.id, "expired", null, now, NOT_PERFORMED);
    else {
      const inFlight = hold.status === "running";
      approvals.holds.markRunning(hold.id);
      approvals.holds.settle(hold.id, inFlight ? "unknown" : "refused", inFlight ? CUT_SHORT : NOT_PERFORMED);
      effects.done("hold", hold.id);
    }
    turns.post(hold.conversation, { kind: "card", card: cardFor(approvals.holds.get(hold.id)!, route.tenant, route.agent) }, `card:${hold.id}`);
  }
}

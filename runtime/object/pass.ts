// The pass: what one alarm does. It advances the conversations an event, a
// reply or a decision reached (every running one now and then, for safety),
// performs approved holds, hands due effects to their couriers, and
// has the owner of each effect whose leases ran out end it with a sentence.
// It never awaits the network; a failure in one conversation ends that turn
// only.
import { ConfigError } from "../../lib/config.ts";
import { MountError } from "../../plugins/index.ts";
import type { ApprovalFlow, Leases, ToolCalls, ToolLists } from "../tools/index.ts";
import type { BusyTime } from "../metering/index.ts";
import type { Route } from "../chat.ts";
import type { Conversations } from "../store/index.ts";
import type { Dispatch, EffectCarriers, EffectRow, Effects, Outbox } from "../effects/index.ts";
import type { ModelJobs } from "../models/index.ts";
import type { PassContext } from "../pass-context.ts";
import type { Turns } from "../turns/index.ts";
import type { Delegation } from "../turns/index.ts";
import type { AuditOutbox } from "./audit-outbox.ts";

/** Every so often a pass advances every running conversation, not only the marked ones. */
const SWEEP_MS = 60_000;
/** Busy time per turn and hour is kept this long in the object (the ledger keeps the hours). */
const BUSY_KEPT_MS = 35 * 24 * 3_600_000;

/** The parts a pass moves, as the object wires them. */
export interface PassParts {
  storage: DurableObjectStorage;
  /** Read at each pass: the bindings are the object's env's (tests swap them to watch what a pass sends). */
  carriers: () => EffectCarriers;
  store: Conversations;
  effects: Effects;
  jobs: ModelJobs;
  tools: ToolCalls;
  toolLists: ToolLists;
  outbox: Outbox;
  turns: Turns;
  approvals: ApprovalFlow;
  leases: Leases;
  audits: AuditOutbox;
  busyTime: BusyTime;
  /** Child runs past their time limit are stopped at the start of a pass (the alarm is due then). */
  children: Delegation;
  /** Mounts and model as they are now (throws on a configuration that cannot work). */
  context: (route: Route) => PassContext;
  /** What travels with a due effect (runtime/object/claims.ts). */
  dispatch: (route: Route, row: EffectRow) => Dispatch;
}

export class Pass {
  private lastSweep = 0;

  constructor(private readonly parts: PassParts) {}

  /** `advance` false (a deleted agent, runtime/object/deletion.ts): no turn moves and no hold is performed; what the outbox holds is still sent. */
  async run(route: Route, advance: boolean): Promise<void> {
    const { effects, toolLists, approvals, leases, busyTime, storage, carriers, dispatch, store, children } = this.parts;
    if (advance) storage.transactionSync(() => children.expireDue());
    const pass = advance ? this.contextOrFailTurns(route) : null;
    if (!advance) store.takeMarked();
    if (pass) {
      toolLists.request(pass.gateway);
      await approvals.performApproved(pass);
      for (const id of this.dueConversations()) await busyTime.serving(id, () => this.advanceOrFail(pass, id));
    }
    // After the turns moved: a machine whose conversation settled ends in this pass.
    storage.transactionSync(() => leases.sweep());
    const { sent, givenUp } = await effects.send(carriers(), route, (row) => dispatch(route, row));
    busyTime.served([...sent, ...givenUp].map((effect) => effect.conversation));
    if (givenUp.length > 0) storage.transactionSync(() => givenUp.forEach((effect) => this.giveUp(route, effect)));
  }

  /** Only conversations an event, a reply or a decision reached; every running one now and then, for safety. */
  private dueConversations(): string[] {
    const { store, jobs, busyTime } = this.parts;
    const marked = store.takeMarked();
    if (Date.now() - this.lastSweep < SWEEP_MS) return marked;
    this.lastSweep = Date.now();
    jobs.prune();
    busyTime.prune(BUSY_KEPT_MS);
    return [...new Set([...marked, ...store.runningIds()])];
  }

  /** An effect whose leases all ran out: its owner ends it with a sentence the person sees. */
  private giveUp(route: Route, effect: EffectRow): void {
    const { jobs, turns, outbox, tools, approvals, toolLists, leases, audits } = this.parts;
    switch (effect.kind) {
      case "model": {
        const job = jobs.get(effect.id);
        if (job?.status === "pending") turns.settle(job, { kind: "failed", error: "the model provider did not answer in time. Please try again in a moment." });
        return;
      }
      case "send":
        return outbox.giveUp(Number(effect.id));
      case "tool":
        return tools.giveUp(effect.id);
      case "hold":
        return approvals.giveUp(route, effect.id);
      case "mount":
        return toolLists.giveUp(effect.id);
      case "lease":
        return leases.giveUp(effect.id);
      case "audit":
        return audits.giveUp(effect.id);
      case "typing":
        return; // nobody waits for it; the next model call shows it again
    }
  }

  /**
   * A mount or model configuration that cannot work fails the running turns
   * (and the approved holds) with the reason, rather than retrying forever.
   */
  private contextOrFailTurns(route: Route): PassContext | null {
    const { context, storage, turns, approvals } = this.parts;
    try {
      return context(route);
    } catch (err) {
      if (!(err instanceof MountError || err instanceof ConfigError)) throw err;
      const reason = `configuration error: ${err.message}`;
      storage.transactionSync(() => {
        turns.failRunning(reason);
        approvals.refuseApproved(route, reason);
      });
      return null;
    }
  }

  /**
   * One conversation's failure (a bad config value, a row SQLite refuses) ends
   * that turn with the reason; it neither stops the others nor loops the alarm.
   */
  private async advanceOrFail(pass: PassContext, id: string): Promise<void> {
    const { turns, store, storage } = this.parts;
    try {
      await turns.advance(pass, id);
    } catch (err) {
      console.error(`conversation ${id}: the pass failed`, err);
      const conv = store.get(id);
      const reason = err instanceof ConfigError ? `configuration error: ${err.message}` : `internal error: ${err instanceof Error ? err.message : String(err)}`;
      if (conv?.status === "running") storage.transactionSync(() => turns.end(conv, "failed", reason));
    }
  }
}

// The approvals glue: a call whose policy says `approval` becomes a hold and a
// card; a click decides it once; an approved hold is performed once under the
// mount's policy as it is then; a hold past its TTL expires when the agent next
// steps. Either way the agent is told and the card shows the outcome.
import type { ToolCall, ToolResultMessage } from "@mariozechner/pi-ai";
import { cardFor, Holds, mayDecide, type Card, type HoldRow, type Person, type SettledStatus } from "../../approvals/index.ts";
import { clip } from "../../lib/text.ts";
import type { CallScope, GatewayResult } from "../../plugins/index.ts";
import { type Conversations, type ConversationRow } from "../store/index.ts";
import type { ChatEvent, ChatUser, OutboundMessage, Route } from "../chat.ts";
import { approvalTtlMs, approversFor } from "./config.ts";
import type { Effects } from "../effects/index.ts";
import type { MountSessions } from "./mount-sessions.ts";
import { toolResult, type ToolCalls, type ToolReport, type ToolWork } from "./tool-calls.ts";
import type { PassContext } from "../pass-context.ts";

const OUTCOME_PREFIX: Record<SettledStatus, string> = {
  performed: "Performed",
  failed: "Performed, but it failed",
  unknown: "Outcome unknown",
  refused: "Not performed",
};

export type Decision = { notice: string; card?: Card; decided?: boolean };

/** What the approvals glue asks of the turn machine (the object hands it its Turns). */
export interface TurnNotices {
  /** The agent is told at its next step; an idle agent is woken to carry on. */
  notify(conversation: string, text: string): void;
  /** A message to the conversation's chat, written in the caller's transaction. */
  post(conversation: string, message: OutboundMessage, refKey?: string): void;
}

export class ApprovalFlow {
  constructor(
    private readonly storage: DurableObjectStorage,
    private readonly env: Env,
    readonly holds: Holds,
    private readonly conversations: Conversations,
    private readonly tools: ToolCalls,
    private readonly effects: Effects,
    private readonly sessions: MountSessions,
    private readonly turns: TurnNotices,
  ) {}

  /** An approval call becomes a hold and a card; the model is told it is paused, and its turn goes on. */
  hold(pass: PassContext, conv: ConversationRow, key: string, call: ToolCall): ToolResultMessage {
    const checked = pass.gateway.validate(call.name, call.arguments);
    const result = checked.ok
      ? heldResult(
          call,
          this.holds.create({
            conversation: conv.id,
            callKey: key,
            tool: call.name,
            // The card shows the arguments: a secret the model put in them must not reach the chat.
            args: JSON.parse(pass.gateway.redact(JSON.stringify(checked.args))),
            ...this.requester(conv),
            ttlMs: approvalTtlMs(this.env),
          }),
        )
      : toolResult(call, checked.output);
    this.tools.record(key, conv, call, result);
    const hold = this.holds.byCallKey(key);
    if (hold) this.postCard(pass.route, hold.id);
    return result;
  }

  /** Who asked: the person whose message started the current turn (none when the runtime started it). */
  private requester(conv: ConversationRow): { requestedBy: string; requester: ChatUser | null } {
    const { start } = this.conversations.turnStart(conv);
    const by = "by" in start ? (start.by as Partial<ChatUser> & { runtime?: boolean }) : undefined;
    if (!by?.platform || !by.id) return { requestedBy: "the agent", requester: null };
    return { requestedBy: by.name ?? by.id, requester: by as ChatUser };
  }

  /** A listed approver of the tenant, or the person who asked. */
  mayDecide(route: Route, hold: HoldRow, person: Person): boolean {
    const requester = hold.requester ? (JSON.parse(hold.requester) as Person) : null;
    return mayDecide(person, approversFor(this.env, route.tenant), requester);
  }

  /** A click on a card: one decision wins (a single transition from pending), the rest are told. */
  decide(route: Route, event: Extract<ChatEvent, { kind: "decision" }>): Decision {
    if (event.boundTo.tenant !== route.tenant || event.boundTo.agent !== route.agent) {
      return { notice: "Refused: this button belongs to another workspace or agent." };
    }
    const hold = this.holds.get(event.holdId);
    if (!hold) return { notice: "There is no approval with that id." };
    const card = () => cardFor(this.holds.get(hold.id)!, route.tenant, route.agent);
    if (hold.status !== "pending") {
      // A hold being performed is, to the person clicking, approved.
      const decided = hold.status === "running" ? "approved" : hold.status;
      return { notice: `Already decided: ${decided}${hold.decided_by ? ` by ${hold.decided_by}` : ""}.`, card: card() };
    }
    // Permission first: a stranger's click must not even expire a hold (expiry wakes the agent).
    if (!this.mayDecide(route, hold, event.user)) {
      return { notice: "You are not allowed to decide this approval. It is still waiting.", card: card() };
    }
    const now = Date.now();
    if (now >= hold.expires_at) {
      this.expire(route, hold, now);
      return { notice: "This approval has expired; nothing was performed.", card: card(), decided: true };
    }
    const who = event.user.name ?? event.user.id;
    const why = event.reason ? ` (${clip(event.reason, 500)})` : "";
    if (event.approve) {
      this.holds.decide(hold.id, "approved", who, now, `Approved by ${who}${why}; performing.`);
    } else {
      this.holds.decide(hold.id, "denied", who, now, `Denied by ${who}${why}; not performed.`);
      this.turns.notify(hold.conversation, `The held call ${hold.tool} (hold ${hold.id}) was denied by ${who}${why}. It was not performed.`);
    }
    this.postCard(route, hold.id);
    return { notice: event.approve ? "Approved. Performing it now." : "Denied. It will not be performed.", card: card(), decided: true };
  }

  private expire(route: Route, hold: HoldRow, now: number): void {
    if (!this.holds.decide(hold.id, "expired", null, now, "Expired before anyone decided; not performed.")) return;
    this.postCard(route, hold.id);
    this.turns.notify(hold.conversation, `The held call ${hold.tool} (hold ${hold.id}) expired before anyone decided. It was not performed.`);
  }

  /** Holds past their TTL are expired when the agent next steps, never by a timer. */
  expireDue(route: Route, conversation: string): void {
    const now = Date.now();
    for (const hold of this.holds.pending(conversation)) if (now >= hold.expires_at) this.expire(route, hold, now);
  }

  private postCard(route: Route, holdId: string): void {
    const hold = this.holds.get(holdId)!;
    this.turns.post(hold.conversation, { kind: "card", card: cardFor(hold, route.tenant, route.agent) }, `card:${holdId}`);
  }

  /** Approved holds to act on now: new ones, and one cut short mid-call in the object. A courier's hold waits for its report. */
  hasWork(): boolean {
    return this.holds.toPerform().some((hold) => hold.status === "approved" || !this.effects.get("hold", hold.id));
  }

  /**
   * Performs approved holds once each, under the mount's policy as it is now:
   * in the object for a plugin that runs there, otherwise through a courier.
   */
  async performApproved(pass: PassContext): Promise<void> {
    for (const hold of this.holds.toPerform()) {
      if (this.effects.get("hold", hold.id)) continue; // a courier has it
      if (pass.gateway.runsIn(hold.tool) === "courier") {
        this.storage.transactionSync(() => {
          this.holds.markRunning(hold.id);
          this.effects.add("hold", hold.id, hold.conversation);
        });
        continue;
      }
      const replay = hold.status === "running";
      this.holds.markRunning(hold.id);
      const result = await pass.gateway.call(hold.tool, JSON.parse(hold.args), this.scope(pass.route, hold), { replay, approved: true });
      this.storage.transactionSync(() => this.settleWith(pass.route, hold, result));
    }
  }

  /** A courier's claim of an approved hold: the work, with the mount as it is now. `replay`: an earlier claim may have performed it. */
  claim(pass: PassContext, id: string, replay: boolean): ToolWork | null {
    const hold = this.holds.get(id);
    if (hold?.status !== "running") return null;
    const mount = pass.gateway.mountOf(hold.tool);
    if (!mount) {
      this.settle(pass.route, hold, "refused", `Not performed: ${hold.tool} is no longer mounted.`);
      return null;
    }
    return {
      mount,
      tool: hold.tool,
      args: JSON.parse(hold.args),
      scope: this.scope(pass.route, hold),
      replay,
      approved: true,
      session: this.sessions.snapshot(mount.alias),
    };
  }

  /** A courier's result for a hold; a second report changes nothing. */
  report(route: Route, id: string, report: ToolReport): boolean {
    const hold = this.holds.get(id);
    if (hold?.status !== "running") return false;
    this.sessions.replace(report.alias, report.session);
    this.settleWith(route, hold, report.result);
    return true;
  }

  /** A hold whose couriers never answered: its outcome is unknown, and it is not performed again. */
  giveUp(route: Route, id: string): void {
    const hold = this.holds.get(id);
    if (hold?.status === "running") this.settle(route, hold, "unknown", `${OUTCOME_PREFIX.unknown}: the tool did not answer in time.`);
  }

  private scope(route: Route, hold: HoldRow): CallScope {
    const audience = this.conversations.audienceOf(route, this.conversations.get(hold.conversation)!);
    return { ...route, conversation: hold.conversation, callKey: hold.call_key, audience };
  }

  private settleWith(route: Route, hold: HoldRow, result: GatewayResult): void {
    const status: SettledStatus =
      result.disposition === "performed" ? (result.isError ? "failed" : "performed") : result.disposition === "unknown" ? "unknown" : "refused";
    this.settle(route, hold, status, `${OUTCOME_PREFIX[status]}: ${clip(result.text, 600)}`);
  }

  /** Approved holds that can never be performed (a configuration that cannot work) are refused with the reason. */
  refuseApproved(route: Route, reason: string): void {
    for (const hold of this.holds.toPerform()) this.settle(route, hold, "refused", `Not performed: ${reason}`);
  }

  private settle(route: Route, hold: HoldRow, status: SettledStatus, outcome: string): void {
    this.holds.markRunning(hold.id);
    this.holds.settle(hold.id, status, outcome);
    this.effects.done("hold", hold.id);
    this.postCard(route, hold.id);
    this.turns.notify(hold.conversation, `The held call ${hold.tool} (hold ${hold.id}) was approved by ${hold.decided_by}. ${outcome}`);
  }
}

function heldResult(call: ToolCall, hold: HoldRow): ToolResultMessage {
  return toolResult(call, {
    text:
      `Held for approval (hold ${hold.id}): a person has been asked in the chat to approve ${call.name}. It has NOT been performed yet. ` +
      "You will be told the outcome when they decide. Meanwhile, tell the person what you are waiting for, or go on with other work.",
  });
}

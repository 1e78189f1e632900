// Inbound: the durable write of what people send (a message, a steer, a stop,
// a command, a decision on a hold, a note of what they look at), deduplicated by the event's id so a
// platform's retry is one event. It records and marks; the pass does the work.
import type { ApprovalFlow } from "../tools/index.ts";
import type { ChatEvent, ConversationStatus, Route, SubmitResult } from "../chat.ts";
import type { Conversations, ConversationRow } from "../store/index.ts";
import type { ModelJobs } from "../models/index.ts";
import type { Turns } from "../turns/index.ts";

export class Inbound {
  constructor(
    private readonly store: Conversations,
    private readonly turns: Turns,
    private readonly jobs: ModelJobs,
    private readonly approvals: ApprovalFlow,
    /** The `status` command's answer (runtime/object/status.ts), composed by the object. */
    private readonly describe: (conv: ConversationRow, status: ConversationStatus) => string,
  ) {}

  /** Run inside the object's transaction: either the whole event is recorded or none of it. */
  accept(route: Route, event: ChatEvent): SubmitResult {
    const existing = this.store.get(event.conversation);
    if (!this.store.recordInbound(event.id, event.conversation, event.kind)) {
      return { accepted: false, conversation: event.conversation, status: existing ? this.statusOf(existing) : "idle" };
    }
    const statusNow = () => {
      const conv = this.store.get(event.conversation);
      return conv ? this.statusOf(conv) : "idle";
    };
    // A decision is about a hold, wherever it was clicked.
    if (event.kind === "decision") {
      return { accepted: true, conversation: event.conversation, status: statusNow(), ...this.approvals.decide(route, event) };
    }
    // Only a person's message (or what they look at) starts a conversation: a command or
    // a stop in an empty channel creates nothing (and so makes nobody its starter).
    const starts = event.kind === "message" || event.kind === "steer" || event.kind === "note";
    const conv = existing ?? (starts ? this.store.create(event.conversation, event.user, Date.now()) : undefined);
    if (!conv) {
      const stopping = event.kind === "interrupt" || (event.kind === "command" && event.command === "stop");
      const notice = stopping ? "Nothing is running in this conversation." : "There is no conversation here yet.";
      return { accepted: true, conversation: event.conversation, status: "idle", notice };
    }
    if (event.replyTo) this.store.setReplyTo(conv.id, event.replyTo);

    const first = event.kind === "message" && conv.turn === 0;
    let notice: string | undefined;
    switch (event.kind) {
      case "message":
      case "steer":
        notice = this.turns.message(conv, event.text, event.user, event.attachments, event.kind === "steer");
        break;
      case "note":
        this.turns.note(conv, event.text);
        break;
      case "interrupt":
        notice = this.turns.interrupt(conv.id);
        break;
      case "command":
        notice = this.command(conv, event.command);
        break;
    }
    return { accepted: true, conversation: conv.id, status: statusNow(), notice, ...(first ? { first } : {}) };
  }

  /** A running conversation whose model call is out is shown as waiting for the model. */
  statusOf(conv: ConversationRow): ConversationStatus {
    if (conv.status !== "running") return conv.status;
    return this.jobs.isOpen(conv.id) ? "waiting_model" : "running";
  }

  private command(conv: ConversationRow, command: "stop" | "compact" | "status"): string {
    switch (command) {
      case "stop":
        return this.turns.interrupt(conv.id);
      case "status":
        return this.describe(conv, this.statusOf(conv));
      case "compact":
        return this.turns.compact(conv.id);
    }
  }
}

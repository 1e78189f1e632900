// The turn state machine. A turn starts with a person's message (or a runtime
// note), alternates model calls and tool calls, takes steering before each
// model call, and ends done, stopped, failed or compacted. `advance` moves one
// conversation until it must wait; it never waits for the model.
import type { AssistantMessage, UserMessage } from "@mariozechner/pi-ai";
import type { Gateway } from "../plugins/index.ts";
import type { ApprovalFlow } from "./approval-flow.ts";
import type { ChatUser, OutboundMessage, Route } from "./chat.ts";
import { compactionRequest, compactRefusal, needsCompaction } from "./compaction.ts";
import type { ModelChoice, ModelPick } from "./models/index.ts";
import type { Conversations, ConversationRow, InboxItem } from "./conversations.ts";
import type { ModelRequest } from "./model-job.ts";
import type { JobPurpose, JobRow, ModelJobs, Settled } from "./model-jobs.ts";
import type { Outbox } from "./outbox.ts";
import { toolCalls, type ToolCalls } from "./tool-calls.ts";
import { isMessageRow, modelMessages, textOf, type HandoverData, type UserData } from "./transcript.ts";

const INTERRUPT_NOTE =
  "The person stopped the previous turn. Do not continue or resume the interrupted task unless they ask for it again.";

export type TurnOutcome = "done" | "stopped" | "failed" | "compacted";

/** What a pass knows while it advances conversations. */
export interface PassContext {
  route: Route;
  gateway: Gateway;
  /** The model chosen for this agent, as the jobs carry it, and resolved. */
  pick: ModelPick;
  model: ModelChoice;
  systemPrompt: string;
}

export class Turns {
  /** Set once the approval flow exists (it notifies turns, and turns hold calls through it). */
  approvals!: ApprovalFlow;

  constructor(
    private readonly storage: DurableObjectStorage,
    private readonly conversations: Conversations,
    private readonly jobs: ModelJobs,
    private readonly tools: ToolCalls,
    private readonly outbox: Outbox,
  ) {}

  // ---- events from people ------------------------------------------------------

  /** A person's message: a new turn, or a steer when a turn is running. */
  message(conv: ConversationRow, text: string, by: ChatUser): void {
    const running = conv.status === "running";
    const data: UserData = { message: userMessage(text), by, steer: running };
    // A steer waits for the next model call, or (between a reply and the turn's end) is taken by the pass.
    if (running) {
      this.conversations.queue(conv.id, { type: "user", data });
      this.conversations.markForPass(conv.id);
    }
    else this.start(conv, { type: "user", data }, by);
  }

  /** The agent is told at its next step; an idle agent is woken to carry on. */
  notify(conversation: string, text: string): void {
    const conv = this.conversations.get(conversation)!;
    if (conv.status === "running") {
      this.conversations.queue(conversation, { type: "marker", data: { text } });
      this.conversations.markForPass(conversation);
    } else this.start(conv, { type: "marker", data: { text } }, { runtime: true });
  }

  /** Ends the running turn: its open jobs are discarded and a note keeps the model from resuming it. */
  interrupt(conversation: string): string {
    const conv = this.conversations.get(conversation)!;
    if (conv.status !== "running") return "Nothing is running in this conversation.";
    this.jobs.discardOpen(conversation);
    this.tools.closeOpen(conv);
    // Messages and notes that were waiting are kept (the model sees them next time), before the note.
    this.drainInbox(conv);
    this.conversations.append(conversation, conv.turn, "marker", { text: INTERRUPT_NOTE });
    this.end(conv, "stopped");
    return "Stopped the running turn.";
  }

  /** A person's `compact`: a turn whose only job is the summary. */
  compact(conversation: string): string {
    const conv = this.conversations.get(conversation)!;
    const rows = this.conversations.log(conversation);
    const refusal = compactRefusal(conv.status, rows);
    if (refusal) return refusal;
    this.conversations.beginTurn(conv, { purpose: "compact" });
    return `Compacting ${modelMessages(rows).length} messages into a summary.`;
  }

  // ---- turn boundaries -----------------------------------------------------------

  private start(conv: ConversationRow, first: InboxItem, by: ChatUser | { runtime: true }): void {
    const turn = this.conversations.beginTurn(conv, { by });
    this.conversations.append(conv.id, turn, first.type, first.data);
    this.post(conv.id, { kind: "status", state: "working", text: "Working on it…" });
  }

  end(conv: ConversationRow, outcome: TurnOutcome, error?: string, reply?: string): void {
    this.conversations.append(conv.id, conv.turn, "turn_end", { outcome, error });
    this.conversations.finishTurn(conv.id, outcome === "failed" ? "failed" : "idle", error ?? null);
    switch (outcome) {
      case "done":
        this.post(conv.id, { kind: "reply", text: reply?.trim() ? reply : "(The model finished without saying anything.)" });
        this.post(conv.id, { kind: "status", state: "done", text: "Done." });
        break;
      case "stopped":
        this.post(conv.id, { kind: "status", state: "stopped", text: "Stopped." });
        this.post(conv.id, { kind: "notice", text: "The turn was stopped." });
        break;
      case "failed":
        this.post(conv.id, { kind: "status", state: "failed", text: "Failed." });
        this.post(conv.id, { kind: "notice", text: `Sorry, this turn failed: ${truncate(error ?? "no reason given", 1000)}` });
        break;
      case "compacted":
        this.post(conv.id, { kind: "notice", text: "The conversation so far was compacted into a summary." });
        break;
    }
    // What arrived while a turn that ended early was running starts the next turn, so nothing waits unanswered.
    if (outcome === "failed" || outcome === "compacted") {
      const first = this.conversations.takeFirst(conv.id);
      if (first) this.start(this.conversations.get(conv.id)!, first, first.type === "user" ? first.data.by : { runtime: true });
    }
  }

  /** Fails every running turn with `reason` (a configuration that cannot work). */
  failRunning(reason: string): void {
    for (const id of this.conversations.runningIds()) this.end(this.conversations.get(id)!, "failed", reason);
  }

  /** Written in the caller's transaction; sent by the pass. A turn's status is updated in place. */
  post(conversation: string, message: OutboundMessage, refKey?: string): void {
    const conv = this.conversations.get(conversation)!;
    const address = this.conversations.replyAddress(conv);
    if (!address) return; // the Agents API reads the transcript instead
    const key = refKey ?? (message.kind === "status" ? `status:${conversation}:${conv.turn}` : null);
    this.outbox.post(conversation, address, message, key);
  }

  // ---- model replies ---------------------------------------------------------------

  /** A job's outcome reaches its turn, if the turn still waits for it. */
  settle(job: JobRow, settled: Settled): void {
    this.jobs.settle(job, settled);
    const conv = this.conversations.get(job.conversation)!;
    if (conv.status !== "running" || conv.turn !== job.turn) return;
    if (settled.kind === "failed") return this.end(conv, "failed", settled.error);
    this.conversations.markForPass(conv.id);
    const message = settled.message;
    const usage = message.usage;
    this.conversations.addUsage(conv.id, usage.input + usage.cacheRead + usage.cacheWrite, usage.output, usage.cost.total);
    const { seq, start } = this.conversations.turnStart(conv);
    if (job.purpose === "compact" && "purpose" in start) {
      this.conversations.append(conv.id, conv.turn, "handover", { summary: textOf(message.content) } satisfies HandoverData);
      return this.end(conv, "compacted");
    }
    if (job.purpose === "compact") {
      // Compacted on the way: the turn goes on with the summary and its own messages.
      this.conversations.append(conv.id, conv.turn, "handover", { summary: textOf(message.content), keepFrom: seq } satisfies HandoverData);
      return;
    }
    this.conversations.append(conv.id, conv.turn, "assistant", message);
  }

  // ---- advancing ---------------------------------------------------------------------

  /** Advances one conversation until it must wait. */
  async advance(pass: PassContext, id: string): Promise<void> {
    for (;;) {
      const conv = this.conversations.get(id);
      if (!conv || conv.status !== "running") return;
      if (this.jobs.isOpen(id)) return; // waiting for the model
      const { seq: startSeq, start } = this.conversations.turnStart(conv);
      if ("purpose" in start) return this.createJob(conv, "compact", JSON.stringify(compactionRequest(pass.pick, this.conversations.log(id))));
      const last = this.conversations.log(id).filter(isMessageRow).at(-1);
      if (last?.type === "assistant") {
        const message = JSON.parse(last.data) as AssistantMessage;
        const calls = toolCalls(message);
        if (calls.length > 0) {
          if ((await this.tools.run(pass, conv, last.seq, calls)) !== "done") return;
          continue;
        }
        const steered = this.storage.transactionSync(() => this.drainInbox(conv));
        if (steered) continue;
        this.storage.transactionSync(() => this.end(conv, "done", undefined, textOf(message.content)));
        return;
      }
      // Steering and runtime notes (expired holds among them) reach the model before its next call.
      this.storage.transactionSync(() => {
        this.approvals.expireDue(pass.route, id);
        this.drainInbox(conv);
      });
      // A mount's first tool list is on its way: the model is asked once it can see those tools (or the fetch failed).
      if (pass.gateway.awaitingToolLists()) return;
      const rows = this.conversations.log(id);
      const body = JSON.stringify({ model: pass.pick, systemPrompt: pass.systemPrompt, messages: modelMessages(rows), tools: pass.gateway.tools() } satisfies ModelRequest);
      if (needsCompaction(pass.model, body.length, rows, startSeq)) {
        return this.createJob(conv, "compact", JSON.stringify(compactionRequest(pass.pick, rows, startSeq)));
      }
      return this.createJob(conv, "chat", body);
    }
  }

  private drainInbox(conv: ConversationRow): boolean {
    const items = this.conversations.drain(conv.id);
    for (const item of items) this.conversations.append(conv.id, conv.turn, item.type, item.data);
    return items.length > 0;
  }

  /** The job row is written before it is dispatched; a large request goes to R2 first. */
  private async createJob(conv: ConversationRow, purpose: JobPurpose, body: string): Promise<void> {
    const id = this.jobs.newId(conv.id, conv.turn, purpose);
    const largeKey = await this.jobs.spill(id, body);
    // The turn may have been stopped (or another job made) while R2 was written.
    if (largeKey && (!this.conversations.stillRunning(conv) || this.jobs.isOpen(conv.id))) return;
    this.jobs.create(id, conv.id, conv.turn, purpose, body, largeKey);
  }
}

function userMessage(text: string): UserMessage {
  return { role: "user", content: text, timestamp: Date.now() };
}

export function truncate(text: string, max: number): string {
  return text.length > max ? `${text.slice(0, max)}…` : text;
}

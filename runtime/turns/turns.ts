// The turn state machine. A turn starts with a person's message (or a runtime
// note), alternates model calls and tool calls, takes steering before each
// model call, compacts on the way when a request would not fit, and ends done,
// stopped, failed, compacted or (a compaction that failed) unchanged. The
// model is offered the agent's tools and, for a turn a Responses API caller
// declared function tools for, the caller's: the turn waits for their outputs.
// `advance` moves one conversation until it must wait; it never waits for the model.
import type { AssistantMessage } from "@mariozechner/pi-ai";
import { clip } from "../../lib/text.ts";
import { type ApprovalFlow, toolCalls, type ToolCalls } from "../tools/index.ts";
import type { Attachment, ChatUser, OutboundMessage, StreamTarget } from "../chat.ts";
import { type Conversations, type ConversationRow, type InboxItem, modelMessages, shownRows, textOf, type CompactionData, type HandoverData, type LogRow, type UserData } from "../store/index.ts";
import {
  compactionRequest,
  compactionTrigger,
  estimateTokens,
  handoverSummary,
  planCompaction,
  refusedAgain,
  requestChars,
  startedCompaction,
  type CompactionPlan,
} from "./compaction.ts";
import { streamKey, type ModelRequest, type JobPurpose, type JobRow, type ModelJobs, type Settled } from "../models/index.ts";
import type { Outbox, Typing } from "../effects/index.ts";
import type { PassContext } from "../pass-context.ts";
import { standingNotes, standingState, withStanding } from "./system-prompt.ts";
import { userMessage } from "./user-message.ts";
import { RESTART_NOTE, RESTARTED_STATUS, SECOND_MESSAGE_NOTICES, type SecondMessage } from "./second-message.ts";
import type { Children, TurnOutcome } from "./children.ts";

/** The ref key a turn's status message is updated in place under. */
const statusKey = (conv: ConversationRow) => `status:${conv.id}:${conv.turn}`;

const INTERRUPT_NOTE =
  "The person stopped the previous turn. Do not continue or resume the interrupted task unless they ask for it again.";

export class Turns {
  constructor(
    private readonly storage: DurableObjectStorage,
    private readonly conversations: Conversations,
    private readonly jobs: ModelJobs,
    private readonly tools: ToolCalls,
    private readonly outbox: Outbox,
    private readonly typing: Typing,
    private readonly approvals: ApprovalFlow,
    /** The agent's strategy for a message that arrives while a turn runs, from its settings. */
    private readonly secondMessage: () => SecondMessage,
    private readonly children: Children,
  ) {}

  // ---- events from people ------------------------------------------------------

  /**
   * A person's message: a new turn, or, while a turn runs, what the agent's
   * second-message strategy makes of it (an explicit steer always steers).
   * Returns what the person was told, if anything.
   */
  message(conv: ConversationRow, text: string, by: ChatUser, attachments: Attachment[] = [], steer = false): string | undefined {
    const data = (steering: boolean): UserData => ({ message: userMessage(text, attachments), by, steer: steering });
    if (conv.status !== "running") return void this.start(conv, { type: "user", data: data(false) }, by);
    switch (steer ? "steer" : this.secondMessage()) {
      case "steer":
        // A steer waits for the next model call, or (between a reply and the turn's end) is taken by the pass.
        this.conversations.queue(conv.id, { type: "user", data: data(true) });
        this.conversations.markForPass(conv.id);
        return undefined;
      case "queue":
        this.conversations.queueBehind(conv.id, data(false));
        return this.tell(conv.id, SECOND_MESSAGE_NOTICES.queue);
      case "reject":
        return this.tell(conv.id, SECOND_MESSAGE_NOTICES.reject);
      case "interrupt":
        this.cut(conv, RESTART_NOTE);
        this.end(conv, "restarted");
        this.start(this.conversations.get(conv.id)!, { type: "user", data: data(false) }, by);
        return undefined;
    }
  }

  /** A notice in the conversation's chat, and the same words for the caller's answer. */
  private tell(conversation: string, text: string): string {
    this.post(conversation, { kind: "notice", text });
    return text;
  }

  /** Context for the model's next step; an idle conversation stays idle (its next turn takes it). */
  note(conv: ConversationRow, text: string): void {
    this.conversations.queue(conv.id, { type: "marker", data: { text } });
    if (conv.status === "running") this.conversations.markForPass(conv.id);
  }

  /** The agent is told at its next step; an idle agent is woken to carry on. */
  notify(conversation: string, text: string): void {
    const conv = this.conversations.get(conversation)!;
    if (conv.status === "running") {
      this.conversations.queue(conversation, { type: "marker", data: { text } });
      this.conversations.markForPass(conversation);
    } else this.start(conv, { type: "marker", data: { text } }, { runtime: true });
  }

  /** Ends the running turn (failed with `failure`, else stopped): its open jobs are discarded and a note keeps the model from resuming it. */
  interrupt(conversation: string, failure?: string): string {
    const conv = this.conversations.get(conversation)!;
    if (conv.status !== "running") return "Nothing is running in this conversation.";
    this.cut(conv, INTERRUPT_NOTE);
    this.end(conv, failure ? "failed" : "stopped", failure);
    return "Stopped the running turn.";
  }

  /** The running turn's open jobs are discarded and its open calls closed; `note` tells the model why. */
  private cut(conv: ConversationRow, note: string): void {
    this.children.cut(conv);
    this.jobs.discardOpen(conv.id);
    this.tools.closeOpen(conv);
    // Messages and notes that were waiting are kept (the model sees them next time), before the note.
    this.drainInbox(conv);
    this.conversations.append(conv.id, conv.turn, "marker", { text: note });
  }

  /** A person's `compact`: a turn whose only job is the summary. */
  compact(conversation: string): string {
    const conv = this.conversations.get(conversation)!;
    if (conv.status === "running") return "A turn is running; stop it or wait for it before compacting.";
    // The model (and so its window) is known only in the pass; with any window, half of what is shown is kept at most.
    if (!planCompaction({ contextWindow: Infinity }, this.conversations.tail(conv), "person")) return "Nothing to compact yet.";
    this.conversations.beginTurn(conv, { purpose: "compact" });
    return "Compacting: the earlier messages are summarised into a handover; the latest stay as they are.";
  }

  // ---- turn boundaries -----------------------------------------------------------

  private start(conv: ConversationRow, first: InboxItem, by: ChatUser | { runtime: true }): number {
    const turn = this.conversations.beginTurn(conv, { by });
    // Notes that waited for this turn (what the person is looking at) came before what starts it: the model reads them first.
    for (const item of this.conversations.drain(conv.id)) this.conversations.append(conv.id, turn, item.type, item.data);
    this.conversations.append(conv.id, turn, first.type, first.data);
    this.post(conv.id, { kind: "status", state: "working", text: "Working on it…" });
    return turn;
  }

  /** The calls of the conversation still waiting for a person's decision, if any. */
  private heldCalls(conversation: string): { waitingFor?: string[] } {
    const tools = this.approvals.holds.pending(conversation).map((hold) => hold.tool);
    return tools.length > 0 ? { waitingFor: tools } : {};
  }

  /** `text`: the reply of a turn done, what a compaction did, or a failure's notice in place of the usual one. */
  end(conv: ConversationRow, outcome: TurnOutcome, error?: string, text?: string): void {
    this.conversations.append(conv.id, conv.turn, "turn_end", { outcome, error });
    this.conversations.finishTurn(conv.id, outcome === "failed" ? "failed" : "idle", error ?? null);
    this.typing.stop(conv.id);
    switch (outcome) {
      case "done": {
        const reply = text?.trim() ? text : "(The model finished without saying anything.)";
        // A reply streamed as it was written was finished when its job settled; one shown in place of the status ends it.
        const streamed = this.replyStreamed(conv);
        if (!streamed && this.answerInStatus(conv, reply)) break;
        if (!streamed) this.post(conv.id, { kind: "reply", text: reply });
        this.post(conv.id, { kind: "status", state: "done", text: "Done.", ...this.heldCalls(conv.id) });
        break;
      }
      case "stopped":
        this.post(conv.id, { kind: "status", state: "stopped", text: "Stopped." });
        this.post(conv.id, { kind: "notice", text: "The turn was stopped." });
        break;
      case "restarted":
        this.post(conv.id, { kind: "status", state: "stopped", text: RESTARTED_STATUS });
        return; // the new message starts the next turn

      case "failed":
        this.post(conv.id, { kind: "status", state: "failed", text: "Failed." });
        this.post(conv.id, { kind: "notice", text: text ?? `Sorry, this turn failed: ${clip(error ?? "no reason given", 1000)}` });
        break;
      case "compacted":
        this.post(conv.id, { kind: "notice", text: text ?? "The conversation so far was compacted into a summary." });
        break;
      case "unchanged":
        this.post(conv.id, { kind: "notice", text: `Compaction failed (${clip(error ?? "no reason given", 1000)}); the conversation is as it was.` });
        break;
    }
    // What arrived while a turn that ended early was running starts the next turn, so nothing waits unanswered.
    if (outcome === "failed" || outcome === "compacted" || outcome === "unchanged") {
      const first = this.conversations.takeFirst(conv.id);
      if (first) this.start(this.conversations.get(conv.id)!, first, first.type === "user" ? first.data.by : { runtime: true });
    }
    this.answerQueued(conv.id);
    this.children.ended(conv, outcome, text ?? error ?? "");
  }

  /** Messages queued behind a turn (the `queue` strategy) are answered once it has ended, together in one turn. */
  private answerQueued(conversation: string): void {
    const conv = this.conversations.get(conversation)!;
    if (conv.status === "running") return; // a turn just started takes them at its own end
    const [first, ...rest] = this.conversations.takeQueued(conversation);
    if (!first) return;
    const turn = this.start(conv, { type: "user", data: first }, first.by);
    for (const data of rest) this.conversations.append(conversation, turn, "user", data);
  }

  /** Fails every running turn with `reason` (a configuration that cannot work). */
  failRunning(reason: string): void {
    for (const id of this.conversations.runningIds()) this.end(this.conversations.get(id)!, "failed", reason);
  }

  /** Written in the caller's transaction; sent by the pass. A turn's status is updated in place. */
  post(conversation: string, message: OutboundMessage, refKey?: string): void {
    const conv = this.conversations.get(conversation)!;
    const address = this.conversations.replyAddress(conv) ?? (message.kind === "card" ? this.children.surfaceOf(conv) : null);
    if (!address) return; // the Agents API reads the transcript instead (a child run's shows its cards only, in its parent's chat)
    const key = refKey ?? (message.kind === "status" ? statusKey(conv) : null);
    this.outbox.post(conversation, address, message, key);
  }

  /**
   * The turn's answer as its status message's last state, where the
   * conversation's platform shows it there and nobody steered the turn (the
   * answer would read above the steer); false: it is not written.
   */
  private answerInStatus(conv: ConversationRow, text: string): boolean {
    const address = this.conversations.replyAddress(conv);
    return address !== null && !this.conversations.steeredInTurn(conv) && this.outbox.answerInStatus(conv.id, address, text, statusKey(conv));
  }

  // ---- model replies ---------------------------------------------------------------

  // ---- streamed replies (runtime/courier/reply-stream.ts) ----------------------------------

  /** Where a chat job's courier streams its reply: the conversation's chat, when its platform can. */
  streamTarget(job: JobRow): StreamTarget | undefined {
    const conv = this.conversations.get(job.conversation);
    const address = conv && this.conversations.replyAddress(conv);
    if (job.purpose !== "chat" || !address || !this.outbox.canStream(address)) return undefined;
    const { start } = this.conversations.turnStart(conv);
    const recipient = "by" in start && "platform" in start.by ? start.by : undefined;
    // A job run again after its courier was cut short finds the message the first run opened; what that
    // message shows is not known (the first courier may have added to it after it reported), so it is replaced.
    const known = this.outbox.refOf(streamKey(job.id));
    return { address, ...(recipient ? { recipient } : {}), ...(known ? { ref: known.ref } : {}) };
  }

  /**
   * The outbox finishes a job's streamed message (if one was opened) with
   * `text`: a reply finishes it whole, never beside a second copy; a failed or
   * stopped job's keeps what it showed, completed rather than left streaming.
   */
  finishStream(job: JobRow, text: string): void {
    if (this.outbox.refOf(streamKey(job.id))) this.post(job.conversation, { kind: "reply", text }, streamKey(job.id));
  }

  private replyStreamed(conv: ConversationRow): boolean {
    const job = this.jobs.lastReply(conv.id, conv.turn);
    return job !== undefined && this.outbox.refOf(streamKey(job)) !== undefined;
  }

  /** A job's outcome reaches its turn, if the turn still waits for it. */
  settle(job: JobRow, settled: Settled): void {
    this.jobs.settle(job, settled);
    this.finishStream(job, settled.kind === "reply" ? textOf(settled.message.content) : (this.outbox.refOf(streamKey(job.id))?.shown ?? ""));
    const conv = this.conversations.get(job.conversation)!;
    if (conv.status !== "running" || conv.turn !== job.turn) return;
    if (job.purpose === "compact") return this.settleCompaction(conv, settled);
    if (settled.kind === "failed") {
      if (!settled.tooLong) return this.end(conv, "failed", settled.error, settled.verbatim ? settled.error : undefined);
      // Too long for the model: one compaction is forced, then the call is made again; refused again, the turn fails.
      if (refusedAgain(this.conversations.tail(conv))) {
        return this.end(conv, "failed", `the conversation is too long for the model even after compaction (${settled.error})`);
      }
      this.conversations.append(conv.id, conv.turn, "compaction", { event: "refused", error: settled.error } satisfies CompactionData);
      return this.conversations.markForPass(conv.id);
    }
    this.conversations.markForPass(conv.id);
    this.addUsage(conv, settled.message);
    this.conversations.append(conv.id, conv.turn, "assistant", settled.message);
    const calls = toolCalls(settled.message);
    if (calls.length > 0) this.post(conv.id, { kind: "status", state: "working", text: `Working on it… using ${calls.map((c) => `\`${c.name}\``).join(", ")}` });
  }

  /**
   * A summary's outcome: a handover in place of the messages before the kept
   * tail. A failed summary changes nothing the model is shown: a person's
   * compaction ends unchanged, one forced by the provider fails its turn, and
   * one made on the way lets the turn go on as it was.
   */
  private settleCompaction(conv: ConversationRow, settled: Settled): void {
    const rows = this.conversations.tail(conv);
    const started = startedCompaction(rows)!;
    const asked = "purpose" in this.conversations.turnStart(conv).start;
    const reply = settled.kind === "reply" ? textOf(settled.message.content).trim() : "";
    if (settled.kind === "reply") this.addUsage(conv, settled.message);
    if (reply === "") {
      const error = settled.kind === "failed" ? settled.error : "the summary came back empty";
      this.conversations.append(conv.id, conv.turn, "compaction", { event: "failed", error } satisfies CompactionData);
      if (asked) return this.end(conv, "unchanged", error);
      if (started.trigger === "refused") return this.end(conv, "failed", `the conversation no longer fits the model's context window, and summarising it failed (${error})`);
      return this.conversations.markForPass(conv.id);
    }
    const previous = shownRows(rows).handover;
    const summary = handoverSummary(reply, previous ? (JSON.parse(previous.data) as HandoverData).summary : null);
    const { trigger, keepFrom, summarised, kept } = started;
    this.conversations.append(conv.id, conv.turn, "handover", { summary, keepFrom, trigger, summarised, kept } satisfies HandoverData);
    if (asked) return this.end(conv, "compacted", undefined, `Compacted: ${count(summarised, "message")} summarised into a handover${kept ? `; the last ${count(kept, "message")} kept as written` : ""}.`);
    this.conversations.markForPass(conv.id);
  }

  private addUsage(conv: ConversationRow, message: AssistantMessage): void {
    const usage = message.usage;
    this.conversations.addUsage(conv.id, usage.input + usage.cacheRead + usage.cacheWrite, usage.output, usage.cost.total);
  }

  // ---- advancing ---------------------------------------------------------------------

  /** Advances one conversation until it must wait. */
  async advance(pass: PassContext, id: string): Promise<void> {
    for (;;) {
      const conv = this.conversations.get(id);
      if (!conv || conv.status !== "running") return;
      if (this.jobs.isOpen(id)) return; // waiting for the model
      const { seq: startSeq, start } = this.conversations.turnStart(conv);
      if ("purpose" in start) {
        const plan = planCompaction(pass.model.settings, this.conversations.tail(conv), "person");
        if (!plan) return this.storage.transactionSync(() => this.end(conv, "unchanged", "there is nothing to compact yet"));
        return this.startCompaction(pass, conv, plan);
      }
      const last = this.conversations.lastMessage(id);
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
        this.noteStanding(pass, conv, startSeq);
      });
      // A mount's first tool list is on its way: the model is asked once it can see those tools (or the fetch failed).
      if (pass.gateway.awaitingToolLists()) return;
      const limit = this.children.limitReached(conv);
      if (limit) return this.storage.transactionSync(() => this.end(conv, "failed", limit));
      const rows = this.conversations.tail(conv);
      const child = this.children.isChild(conv) ? { child: true as const } : {};
      const request: ModelRequest = { model: pass.pick, systemPrompt: this.systemPromptOf(pass, conv, rows), messages: modelMessages(rows), tools: [...this.children.toolsOf(conv, pass.gateway), ...this.tools.callerFunctions(pass, conv)], ...child };
      const body = JSON.stringify(request);
      const trigger = compactionTrigger(pass.model.settings, estimateTokens(requestChars(body, request.messages), rows), rows);
      const plan = trigger && planCompaction(pass.model.settings, rows, trigger);
      if (plan) return this.startCompaction(pass, conv, plan);
      if (trigger === "refused") {
        const refusal = rows.findLast((row) => row.type === "compaction")!;
        const error = (JSON.parse(refusal.data) as { error: string }).error;
        return this.storage.transactionSync(() => this.end(conv, "failed", `the latest messages alone are too long for the model (${error})`));
      }
      return this.createJob(conv, "chat", body);
    }
  }

  private startCompaction(pass: PassContext, conv: ConversationRow, plan: CompactionPlan): Promise<void> {
    const { trigger, keepFrom, earlier, kept } = plan;
    const started: CompactionData = { event: "started", trigger, keepFrom, summarised: earlier.length, kept };
    return this.createJob(conv, "compact", JSON.stringify(compactionRequest(pass.pick, pass.model.settings, plan)), () =>
      this.conversations.append(conv.id, conv.turn, "compaction", started),
    );
  }

  /**
   * The standing documents (memory) are written down for the system prompt
   * when the conversation starts and after each compaction; before a turn's
   * first model call, what changed since reaches the model as a note.
   */
  private noteStanding(pass: PassContext, conv: ConversationRow, startSeq: number): void {
    const docs = pass.gateway.standing(this.conversations.audienceOf(pass.route, conv));
    if (docs.length === 0) return;
    const rows = this.conversations.tail(conv);
    const { snapshot, known } = standingState(rows);
    if (!snapshot) {
      this.conversations.append(conv.id, conv.turn, "standing", { documents: Object.fromEntries(docs.map((d) => [d.alias, d.lines])) });
      return;
    }
    if (rows.some((row) => row.type === "assistant" && row.seq > startSeq)) return;
    for (const note of standingNotes(known, docs)) this.conversations.append(conv.id, conv.turn, "marker", note);
  }

  private systemPromptOf(pass: PassContext, conv: ConversationRow, rows: LogRow[]): string {
    return withStanding(pass.systemPrompt, standingState(rows).snapshot, pass.gateway.standing(this.conversations.audienceOf(pass.route, conv)));
  }

  private drainInbox(conv: ConversationRow): boolean {
    const items = this.conversations.drain(conv.id);
    for (const item of items) this.conversations.append(conv.id, conv.turn, item.type, item.data);
    return items.length > 0;
  }

  /** The job row is written before it is dispatched (with `record`, in one transaction); a large request goes to R2 first. */
  private async createJob(conv: ConversationRow, purpose: JobPurpose, body: string, record?: () => void): Promise<void> {
    const id = this.jobs.newId(conv.id, conv.turn, purpose);
    const largeKey = await this.jobs.spill(id, body);
    // The turn may have been stopped (or another job made) while R2 was written.
    if (largeKey && (!this.conversations.stillRunning(conv) || this.jobs.isOpen(conv.id))) return;
    this.storage.transactionSync(() => {
      this.jobs.create(id, conv.id, conv.turn, purpose, body, largeKey);
      this.typing.start(conv);
      record?.();
    });
  }
}

const count = (n: number, noun: string) => `${n} ${noun}${n === 1 ? "" : "s"}`;

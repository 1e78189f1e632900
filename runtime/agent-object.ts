// AgentObject: one Durable Object per (tenant, agent), with its own SQLite.
//
// `submit` is a durable write that returns at once and arms an alarm for "now".
// The alarm runs one pass (`drive`): it advances every running conversation
// until it must wait (for the model, which is asked through the queue and never
// awaited here), sends the outbox, and arms the alarm again only if something
// is due. An idle object has no alarm.
import { DurableObject } from "cloudflare:workers";
import type { AssistantMessage, ToolCall, ToolResultMessage, UserMessage } from "@mariozechner/pi-ai";
import { cardFor, Holds, mayDecide, type Card, type HoldRow, type Person, type SettledStatus } from "../approvals/index.ts";
import { Gateway, MountError, policyWarnings, type SessionState } from "../plugins/index.ts";
import type {
  ChatEvent,
  ChatUser,
  ConversationStatus,
  OutboundMessage,
  ReplyAddress,
  Route,
  SubmitResult,
} from "./chat.ts";
import { ConfigError, secretNamed } from "../lib/config.ts";
import { approvalTtlMs, approversFor, effectiveMounts, modelChoice, type ModelChoice } from "./config.ts";
import type { ModelJobMessage, ModelOutcome, ModelRequest } from "./model-job.ts";
import type { RuntimeDeps } from "./deps.ts";
import { Outbox } from "./outbox.ts";
import { hasSchema, migrate } from "./schema.ts";
import { clipMessages, isMessageRow, modelMessages, textOf, transcript, type HandoverData, type LogRow, type LogType, type TranscriptEntry, type UserData } from "./transcript.ts";

/** Requests larger than this go to R2; SQLite rows are capped at 2 MB. */
const LARGE_REQUEST_BYTES = 1 << 20;
/** How long an undispatched job waits before the alarm sends it again. */
const REDISPATCH_MS = 5_000;
/** Armed while a pass runs, so a pass cut short by an eviction is run again. */
const PASS_WATCHDOG_MS = 15_000;

/** A request estimated above this share of the model's context window is compacted first. */
const COMPACT_AT = 0.75;
/** Each message's share of a summary request. */
const SUMMARY_MESSAGE_CHARS = 4_000;
/** The offline local model has no real limit; this keeps compaction exercised with it too. */
const LOCAL_CONTEXT_WINDOW = 32_000;

const OUTCOME_PREFIX: Record<SettledStatus, string> = {
  performed: "Performed",
  failed: "Performed, but it failed",
  unknown: "Outcome unknown",
  refused: "Not performed",
};

const INTERRUPT_NOTE =
  "The person stopped the previous turn. Do not continue or resume the interrupted task unless they ask for it again.";

type ConversationRow = {
  id: string;
  status: "idle" | "running" | "failed";
  turn: number;
  reply_to: string | null;
  started_by: string;
  error: string | null;
  input_tokens: number;
  output_tokens: number;
  cost: number;
  created_at: number;
  updated_at: number;
}

type JobRow = {
  id: string;
  conversation: string;
  turn: number;
  purpose: "chat" | "compact";
  status: "pending" | "done" | "discarded" | "failed";
  request: string | null;
  large_key: string | null;
  dispatched: number;
}


export interface ConversationView {
  id: string;
  status: ConversationStatus;
  turn: number;
  error: string | null;
  usage: { inputTokens: number; outputTokens: number; cost: number };
  transcript: TranscriptEntry[];
  /** Approval cards of this conversation, oldest first. */
  holds: Card[];
}

export class IdentityError extends Error {
  override name = "IdentityError";
}

export class AgentObject extends DurableObject<Env> {
  private readonly sql: SqlStorage;
  private readonly holds: Holds;
  private readonly outbox: Outbox;
  /** Passes are serialised: a pass awaits tools and platforms, and events may arrive meanwhile. */
  private pass: Promise<void> | null = null;
  private passAgain = false;
  /** No schema yet: the first write (claim) creates it, so a read of an object never used writes nothing. */
  private fresh: boolean;

  constructor(ctx: DurableObjectState, env: Env, private readonly deps: RuntimeDeps) {
    super(ctx, env);
    this.sql = ctx.storage.sql;
    this.fresh = !hasSchema(ctx.storage);
    if (!this.fresh) migrate(ctx.storage);
    this.holds = new Holds(this.sql);
    this.outbox = new Outbox(ctx.storage, ctx.id.toString(), deps);
  }

  // ---- RPC surface -------------------------------------------------------

  /** A durable write, then an alarm for "now". Never waits for the model or a platform. */
  async submit(route: Route, event: ChatEvent): Promise<SubmitResult> {
    this.claim(route);
    // `status` reports policy warnings, which need the mounts (read before the synchronous write).
    const gateway = event.kind === "command" && event.command === "status" ? await this.loadGateway(route).catch(() => null) : null;
    const result = this.ctx.storage.transactionSync(() => this.accept(route, event, gateway));
    if (result.accepted) await this.wake();
    return result;
  }

  async conversation(route: Route, id: string): Promise<ConversationView | null> {
    if (!this.owns(route)) return null;
    const conv = this.conv(id);
    if (!conv) return null;
    return {
      id,
      status: this.statusOf(conv),
      turn: conv.turn,
      error: conv.error,
      usage: { inputTokens: conv.input_tokens, outputTokens: conv.output_tokens, cost: conv.cost },
      transcript: transcript(this.logRows(id)),
      holds: this.sql
        .exec<HoldRow>("SELECT * FROM holds WHERE conversation = ? ORDER BY created_at", id)
        .toArray()
        .map((hold) => cardFor(hold, route.tenant, route.agent)),
    };
  }

  /** Conversations whose id starts with `prefix` (a bridge finds a channel's threads this way). */
  async conversations(route: Route, prefix = ""): Promise<{ id: string; status: ConversationStatus; updatedAt: number }[]> {
    if (!this.owns(route)) return [];
    return this.sql
      .exec<ConversationRow>("SELECT * FROM conversations WHERE substr(id, 1, ?) = ? ORDER BY updated_at DESC LIMIT 100", prefix.length, prefix)
      .toArray()
      .map((conv) => ({ id: conv.id, status: this.statusOf(conv), updatedAt: conv.updated_at }));
  }

  /** The consumer's read of a job: null when it is no longer wanted (done, discarded). */
  async modelJob(route: Route, jobId: string): Promise<ModelRequest | null> {
    this.claim(route);
    const job = this.job(jobId);
    if (!job || job.status !== "pending") return null;
    if (job.large_key) {
      const object = await this.env.LARGE_VALUES.get(job.large_key);
      if (object) return (await object.json()) as ModelRequest;
      // Without its request the job can never run: fail the turn rather than leave it waiting.
      await this.deliverModelResult(route, jobId, { ok: false, error: "the stored model request was lost; please send your message again" });
      return null;
    }
    return JSON.parse(job.request ?? "null") as ModelRequest;
  }

  /** A reply (or a final failure) for a job. A second delivery of one job changes nothing. */
  async deliverModelResult(route: Route, jobId: string, outcome: ModelOutcome): Promise<boolean> {
    this.claim(route);
    const job = this.job(jobId);
    if (!job || job.status !== "pending") return false;
    this.ctx.storage.transactionSync(() => this.settleJob(job, outcome));
    await this.wake();
    // Cleanup only: a failure here must not undo the wake-up above.
    if (job.large_key) await this.env.LARGE_VALUES.delete(job.large_key).catch((err) => console.warn(`could not delete ${job.large_key}`, err));
    return true;
  }

  override async alarm(): Promise<void> {
    await this.drive();
  }

  // ---- identity ----------------------------------------------------------

  /** The object records its (tenant, agent) on first use and refuses any other. */
  private claim(route: Route): void {
    if (this.fresh) {
      migrate(this.ctx.storage);
      this.fresh = false;
    }
    const rows = this.sql.exec<{ key: string; value: string }>("SELECT key, value FROM meta WHERE key IN ('tenant', 'agent')").toArray();
    const tenant = rows.find((r) => r.key === "tenant")?.value;
    const agent = rows.find((r) => r.key === "agent")?.value;
    if (tenant === undefined) {
      this.sql.exec("INSERT INTO meta (key, value) VALUES ('tenant', ?), ('agent', ?)", route.tenant, route.agent);
      return;
    }
    if (tenant !== route.tenant || agent !== route.agent) {
      throw new IdentityError(
        `this object belongs to tenant "${tenant}" agent "${agent}"; refused a request for tenant "${route.tenant}" agent "${route.agent}"`,
      );
    }
  }

  /** A read's check: refuses another identity as claim does, but an object with none yet has nothing to show and records nothing. */
  private owns(route: Route): boolean {
    const own = this.route();
    if (own === null) return false;
    if (own.tenant !== route.tenant || own.agent !== route.agent) this.claim(route); // throws IdentityError
    return true;
  }

  private route(): Route | null {
    if (this.fresh) return null;
    const rows = this.sql.exec<{ key: string; value: string }>("SELECT key, value FROM meta WHERE key IN ('tenant', 'agent')").toArray();
    const tenant = rows.find((r) => r.key === "tenant")?.value;
    const agent = rows.find((r) => r.key === "agent")?.value;
    return tenant !== undefined && agent !== undefined ? { tenant, agent } : null;
  }

  // ---- accept: the durable write -------------------------------------------

  private accept(route: Route, event: ChatEvent, gateway: Gateway | null): SubmitResult {
    const now = Date.now();
    const seen = this.sql.exec("SELECT 1 FROM inbound WHERE event_id = ?", event.id).toArray().length > 0;
    const existing = this.conv(event.conversation);
    if (seen) {
      return { accepted: false, conversation: event.conversation, status: existing ? this.statusOf(existing) : "idle" };
    }
    this.sql.exec("INSERT INTO inbound (event_id, conversation, kind, at) VALUES (?, ?, ?, ?)", event.id, event.conversation, event.kind, now);
    const statusNow = () => {
      const conv = this.conv(event.conversation);
      return conv ? this.statusOf(conv) : "idle";
    };
    // A decision is about a hold, wherever it was clicked.
    if (event.kind === "decision") {
      return { accepted: true, conversation: event.conversation, status: statusNow(), ...this.decide(route, event) };
    }
    // Only a person's message starts a conversation: a command or a stop in an empty
    // channel creates nothing (and so makes nobody its starter).
    const starts = event.kind === "message" || event.kind === "steer";
    const conv = existing ?? (starts ? this.createConversation(event.conversation, event.user, now) : undefined);
    if (!conv) {
      const stopping = event.kind === "interrupt" || (event.kind === "command" && event.command === "stop");
      const notice = stopping ? "Nothing is running in this conversation." : "There is no conversation here yet.";
      return { accepted: true, conversation: event.conversation, status: "idle", notice };
    }
    if (event.replyTo) this.sql.exec("UPDATE conversations SET reply_to = ? WHERE id = ?", JSON.stringify(event.replyTo), conv.id);

    let notice: string | undefined;
    switch (event.kind) {
      case "message":
      case "steer": {
        const data: UserData = { message: this.userMessage(event.text, now), by: event.user, steer: conv.status === "running" };
        if (conv.status === "running") this.queueInbox(conv.id, "user", data);
        else this.startTurn(conv.id, "user", data, event.user);
        break;
      }
      case "interrupt":
        notice = this.interrupt(conv.id);
        break;
      case "command":
        notice = this.command(conv.id, event.command, gateway);
        break;
    }
    return { accepted: true, conversation: conv.id, status: statusNow(), notice };
  }

  private createConversation(id: string, user: ChatUser, now: number): ConversationRow {
    this.sql.exec(
      "INSERT INTO conversations (id, status, turn, started_by, created_at, updated_at) VALUES (?, 'idle', 0, ?, ?, ?)",
      id,
      JSON.stringify(user),
      now,
      now,
    );
    return this.conv(id)!;
  }

  private userMessage(text: string, now: number): UserMessage {
    return { role: "user", content: text, timestamp: now };
  }

  /** A turn starts with a person's message, or with a runtime note (a decided hold wakes the agent). */
  private startTurn(conversation: string, type: "user" | "marker", data: UserData | { text: string }, by: ChatUser | { runtime: true }): void {
    const turn = this.conv(conversation)!.turn + 1;
    this.sql.exec("UPDATE conversations SET status = 'running', turn = ?, error = NULL, updated_at = ? WHERE id = ?", turn, Date.now(), conversation);
    this.append(conversation, turn, "turn_start", { by });
    this.append(conversation, turn, type, data);
    this.post(conversation, { kind: "status", state: "working", text: "Working on it…" });
  }

  /** Steering (and runtime notes) wait in the inbox and reach the model before its next call. */
  private queueInbox(conversation: string, type: "user" | "marker", data: UserData | { text: string }): void {
    this.sql.exec("INSERT INTO inbox (conversation, type, data, at) VALUES (?, ?, ?, ?)", conversation, type, JSON.stringify(data), Date.now());
  }

  /** The agent is told at its next step; an idle agent is woken to carry on. */
  private notifyAgent(conversation: string, text: string): void {
    const conv = this.conv(conversation)!;
    if (conv.status === "running") this.queueInbox(conversation, "marker", { text });
    else this.startTurn(conversation, "marker", { text }, { runtime: true });
  }

  private command(conversation: string, command: "stop" | "compact" | "status", gateway: Gateway | null): string {
    switch (command) {
      case "stop":
        return this.interrupt(conversation);
      case "status":
        return this.describe(this.conv(conversation)!, gateway);
      case "compact":
        return this.startCompaction(conversation);
    }
  }

  /** Ends the running turn: its open jobs are discarded and a note keeps the model from resuming it. */
  private interrupt(conversation: string): string {
    const conv = this.conv(conversation)!;
    if (conv.status !== "running") return "Nothing is running in this conversation.";
    this.sql.exec("UPDATE model_jobs SET status = 'discarded', settled_at = ? WHERE conversation = ? AND status = 'pending'", Date.now(), conversation);
    this.closeOpenToolCalls(conv);
    // Messages and notes that were waiting are kept (the model sees them next time), before the note.
    this.drainInbox(conv);
    this.append(conversation, conv.turn, "marker", { text: INTERRUPT_NOTE });
    this.endTurn(conv, "stopped");
    return "Stopped the running turn.";
  }

  /** A provider rejects an assistant tool call without a result, so an interrupted batch gets results. */
  private closeOpenToolCalls(conv: ConversationRow): void {
    const last = this.logRows(conv.id).filter(isMessageRow).at(-1);
    if (!last || last.type !== "assistant") return;
    for (const call of toolCalls(JSON.parse(last.data) as AssistantMessage)) {
      const record = this.toolCallRecord(toolCallKey(conv.id, last.seq, call));
      const result =
        record?.status === "done"
          ? (JSON.parse(record.result!) as ToolResultMessage)
          : toolResult(call, { text: record ? "Interrupted while running: the outcome is unknown." : "Not performed: the turn was stopped.", isError: true });
      this.append(conv.id, conv.turn, "tool_result", result);
    }
  }

  private toolCallRecord(key: string): { status: string; result: string | null } | undefined {
    return this.sql.exec<{ status: string; result: string | null }>("SELECT status, result FROM tool_calls WHERE key = ?", key).toArray()[0];
  }

  private describe(conv: ConversationRow, gateway: Gateway | null): string {
    const status = this.statusOf(conv);
    const open = this.sql.exec<{ n: number }>("SELECT COUNT(*) AS n FROM model_jobs WHERE status = 'pending'").one().n;
    const held = this.holds.pending().length;
    const usage = `${conv.input_tokens} tokens in, ${conv.output_tokens} out, $${conv.cost.toFixed(4)}`;
    const error = conv.status === "failed" && conv.error ? ` Last error: ${conv.error}` : "";
    const warnings = gateway ? policyWarnings(gateway.mountsUnderPolicy()).map((w) => `\nWarning: ${w}.`) : ["\nWarning: the mounts could not be read."];
    return `Status: ${status} (turn ${conv.turn}). Open model jobs for this agent: ${open}. Calls waiting for approval: ${held}. Usage in this conversation: ${usage}.${error}${warnings.join("")}`;
  }

  // ---- approvals -----------------------------------------------------------

  /** A click on a card: one decision wins (a single transition from pending), the rest are told. */
  private decide(route: Route, event: Extract<ChatEvent, { kind: "decision" }>): { notice: string; card?: Card; decided?: boolean } {
    if (event.boundTo.tenant !== route.tenant || event.boundTo.agent !== route.agent) {
      return { notice: "Refused: this button belongs to another workspace or agent." };
    }
    const hold = this.holds.get(event.holdId);
    if (!hold) return { notice: "There is no approval with that id." };
    const card = () => cardFor(this.holds.get(hold.id)!, route.tenant, route.agent);
    if (hold.status !== "pending") {
      return { notice: `Already decided: ${hold.status}${hold.decided_by ? ` by ${hold.decided_by}` : ""}.`, card: card() };
    }
    // Permission first: a stranger's click must not even expire a hold (expiry wakes the agent).
    const requester = hold.requester ? (JSON.parse(hold.requester) as Person) : null;
    if (!mayDecide(event.user, approversFor(this.env, route.tenant), requester)) {
      return { notice: "You are not allowed to decide this approval. It is still waiting.", card: card() };
    }
    const now = Date.now();
    if (now >= hold.expires_at) {
      this.expire(hold, now);
      return { notice: "This approval has expired; nothing was performed.", card: card(), decided: true };
    }
    const who = event.user.name ?? event.user.id;
    if (event.approve) {
      this.holds.decide(hold.id, "approved", who, now, `Approved by ${who}; performing.`);
    } else {
      this.holds.decide(hold.id, "denied", who, now, `Denied by ${who}; not performed.`);
      this.notifyAgent(hold.conversation, `The held call ${hold.tool} (hold ${hold.id}) was denied by ${who}. It was not performed.`);
    }
    this.postCard(route, hold.id);
    return { notice: event.approve ? "Approved. Performing it now." : "Denied. It will not be performed.", card: card(), decided: true };
  }

  private expire(hold: HoldRow, now: number): void {
    if (!this.holds.decide(hold.id, "expired", null, now, "Expired before anyone decided; not performed.")) return;
    const route = this.route()!;
    this.postCard(route, hold.id);
    this.notifyAgent(hold.conversation, `The held call ${hold.tool} (hold ${hold.id}) expired before anyone decided. It was not performed.`);
  }

  /** Holds past their TTL are expired when the agent next steps, never by a timer. */
  private expireDueHolds(conversation: string): void {
    const now = Date.now();
    for (const hold of this.holds.pending(conversation)) if (now >= hold.expires_at) this.expire(hold, now);
  }

  private postCard(route: Route, holdId: string): void {
    const hold = this.holds.get(holdId)!;
    this.post(hold.conversation, { kind: "card", card: cardFor(hold, route.tenant, route.agent) }, `card:${holdId}`);
  }

  /** Performs approved holds once each, under the mount's policy as it is now. */
  private async performApprovedHolds(route: Route, gateway: Gateway): Promise<void> {
    for (const hold of this.holds.toPerform()) {
      const replay = hold.status === "running";
      this.holds.markRunning(hold.id);
      const result = await gateway.call(hold.tool, JSON.parse(hold.args), { ...route, conversation: hold.conversation, callKey: hold.call_key }, { replay, approved: true });
      const status: SettledStatus =
        result.disposition === "performed" ? (result.isError ? "failed" : "performed") : result.disposition === "unknown" ? "unknown" : "refused";
      const outcome = `${OUTCOME_PREFIX[status]}: ${truncate(result.text, 600)}`;
      this.ctx.storage.transactionSync(() => this.settleHold(route, hold, status, outcome));
    }
  }

  private settleHold(route: Route, hold: HoldRow, status: SettledStatus, outcome: string): void {
    this.holds.markRunning(hold.id);
    this.holds.settle(hold.id, status, outcome);
    this.postCard(route, hold.id);
    this.notifyAgent(hold.conversation, `The held call ${hold.tool} (hold ${hold.id}) was approved by ${hold.decided_by}. ${outcome}`);
  }

  private heldResult(call: ToolCall, hold: HoldRow): ToolResultMessage {
    return toolResult(call, {
      text:
        `Held for approval (hold ${hold.id}): a person has been asked in the chat to approve ${call.name}. It has NOT been performed yet. ` +
        "You will be told the outcome when they decide. Meanwhile, tell the person what you are waiting for, or go on with other work.",
    });
  }

  // ---- compaction ----------------------------------------------------------

  private startCompaction(conversation: string): string {
    const conv = this.conv(conversation)!;
    if (conv.status === "running") return "A turn is running; stop it or wait for it before compacting.";
    const messages = modelMessages(this.logRows(conversation));
    if (messages.length < 2) return "Nothing to compact yet.";
    const turn = conv.turn + 1;
    this.sql.exec("UPDATE conversations SET status = 'running', turn = ?, error = NULL, updated_at = ? WHERE id = ?", turn, Date.now(), conversation);
    this.append(conversation, turn, "turn_start", { purpose: "compact" });
    return `Compacting ${messages.length} messages into a summary.`;
  }

  /** Summarises the rows before `keepFrom` (all of them when compaction is the turn's purpose). */
  private compactionRequest(rows: LogRow[], keepFrom = Infinity): ModelRequest {
    const earlier = rows.filter((row) => row.seq < keepFrom);
    return {
      systemPrompt:
        "You write handover notes. Summarise the conversation so far so that another assistant can continue it: " +
        "the person's goals, decisions, facts learned, open questions and anything promised. Be complete but brief.",
      // Long messages are clipped, so the summary request itself fits when the conversation no longer does.
      messages: [...clipMessages(modelMessages(earlier), SUMMARY_MESSAGE_CHARS), { role: "user", content: "Write the handover summary now.", timestamp: Date.now() }],
      tools: [],
    };
  }

  /** The current turn's first log row: where it starts, and what it is for. */
  private turnStart(conv: ConversationRow): { seq: number; purpose: JobRow["purpose"] } {
    const row = this.sql.exec<{ seq: number; data: string }>("SELECT seq, data FROM log WHERE conversation = ? AND turn = ? AND type = 'turn_start'", conv.id, conv.turn).one();
    return { seq: row.seq, purpose: JSON.parse(row.data).purpose === "compact" ? "compact" : "chat" };
  }

  /**
   * A chat request that would fill most of the context window is preceded by a
   * compaction of everything before the current turn: once per turn, and only
   * when there is something before it to summarise.
   */
  private needsCompaction(model: ModelChoice, requestChars: number, rows: LogRow[], keepFrom: number): boolean {
    const window = model.kind === "provider" ? model.provider.contextWindow : LOCAL_CONTEXT_WINDOW;
    if (requestChars / 4 < COMPACT_AT * window) return false;
    const already = rows.some((row) => row.type === "handover" && (JSON.parse(row.data) as HandoverData).keepFrom === keepFrom);
    return !already && modelMessages(rows.filter((row) => row.seq < keepFrom)).length >= 2;
  }

  // ---- model jobs ------------------------------------------------------------

  /** The job row (its request serialised as `body`) is written before it is dispatched; a large request goes to R2 first. */
  private async createJob(conv: ConversationRow, purpose: JobRow["purpose"], body: string): Promise<void> {
    const seq = this.sql.exec<{ n: number }>("SELECT COUNT(*) AS n FROM model_jobs WHERE conversation = ? AND turn = ?", conv.id, conv.turn).one().n;
    const id = `${conv.id}:${conv.turn}:${seq}:${purpose}`;
    let largeKey: string | null = null;
    if (new TextEncoder().encode(body).byteLength > LARGE_REQUEST_BYTES) {
      largeKey = `model-requests/${this.ctx.id.toString()}/${encodeURIComponent(id)}`;
      await this.env.LARGE_VALUES.put(largeKey, body);
      if (!this.stillRunning(conv) || this.openJob(conv.id)) return;
    }
    this.sql.exec(
      "INSERT INTO model_jobs (id, conversation, turn, purpose, status, request, large_key, dispatched, created_at) VALUES (?, ?, ?, ?, 'pending', ?, ?, 0, ?)",
      id,
      conv.id,
      conv.turn,
      purpose,
      largeKey ? null : body,
      largeKey,
      Date.now(),
    );
  }

  private settleJob(job: JobRow, outcome: ModelOutcome): void {
    const now = Date.now();
    const conv = this.conv(job.conversation)!;
    const failed = !outcome.ok || outcome.message.stopReason === "error" || outcome.message.stopReason === "aborted";
    this.sql.exec("UPDATE model_jobs SET status = ?, settled_at = ?, request = NULL WHERE id = ?", failed ? "failed" : "done", now, job.id);
    if (conv.status !== "running" || conv.turn !== job.turn) return;
    if (!outcome.ok) return this.endTurn(conv, "failed", outcome.error);
    const message = outcome.message;
    if (failed) return this.endTurn(conv, "failed", message.errorMessage ?? `the model stopped with "${message.stopReason}"`);
    this.sql.exec(
      "UPDATE conversations SET input_tokens = input_tokens + ?, output_tokens = output_tokens + ?, cost = cost + ?, updated_at = ? WHERE id = ?",
      message.usage.input + message.usage.cacheRead + message.usage.cacheWrite,
      message.usage.output,
      message.usage.cost.total,
      now,
      conv.id,
    );
    const start = this.turnStart(conv);
    if (job.purpose === "compact" && start.purpose === "compact") {
      this.append(conv.id, conv.turn, "handover", { summary: textOf(message.content) } satisfies HandoverData);
      this.endTurn(conv, "compacted");
      return;
    }
    if (job.purpose === "compact") {
      // Compacted on the way: the turn goes on with the summary and its own messages.
      this.append(conv.id, conv.turn, "handover", { summary: textOf(message.content), keepFrom: start.seq } satisfies HandoverData);
      return;
    }
    this.append(conv.id, conv.turn, "assistant", message);
  }

  private async dispatchJobs(route: Route): Promise<void> {
    const jobs = this.sql.exec<JobRow>("SELECT * FROM model_jobs WHERE status = 'pending' AND dispatched = 0").toArray();
    for (const job of jobs) {
      const message: ModelJobMessage = { ...route, jobId: job.id };
      try {
        await this.env.MODEL_QUEUE.send(message);
      } catch (err) {
        console.error(`dispatch of ${job.id} failed; the alarm will retry`, err);
        continue;
      }
      this.sql.exec("UPDATE model_jobs SET dispatched = 1 WHERE id = ?", job.id);
    }
  }

  // ---- drive: one pass ---------------------------------------------------------

  /** Runs a pass, or asks the running one to go round again. */
  private async drive(): Promise<void> {
    if (this.pass) {
      this.passAgain = true;
      return this.pass;
    }
    this.pass = (async () => {
      try {
        do {
          this.passAgain = false;
          await this.onePass();
        } while (this.passAgain);
      } finally {
        this.pass = null;
      }
    })();
    return this.pass;
  }

  private async onePass(): Promise<void> {
    const route = this.route();
    if (!route) return;
    await this.ctx.storage.setAlarm(Date.now() + PASS_WATCHDOG_MS);
    const gateway = await this.gatewayOrFailTurns(route);
    if (gateway) {
      await this.performApprovedHolds(route, gateway);
      const running = this.sql.exec<{ id: string }>("SELECT id FROM conversations WHERE status = 'running'").toArray();
      for (const { id } of running) await this.advanceOrFail(route, gateway, id);
    }
    await this.dispatchJobs(route);
    await this.outbox.flush(this.env, route);
    await this.armAlarm();
  }

  /**
   * A mount configuration that cannot work fails the running turns (and the
   * approved holds) with the reason, rather than retrying forever.
   */
  private async gatewayOrFailTurns(route: Route): Promise<Gateway | null> {
    try {
      return await this.loadGateway(route);
    } catch (err) {
      if (!(err instanceof MountError || err instanceof ConfigError)) throw err;
      const reason = `configuration error: ${err.message}`;
      const running = this.sql.exec<ConversationRow>("SELECT * FROM conversations WHERE status = 'running'").toArray();
      this.ctx.storage.transactionSync(() => {
        for (const conv of running) this.endTurn(conv, "failed", reason);
        for (const hold of this.holds.toPerform()) this.settleHold(route, hold, "refused", `Not performed: ${reason}`);
      });
      return null;
    }
  }

  /**
   * One conversation's failure (a bad config value, a row SQLite refuses) ends
   * that turn with the reason; it neither stops the others nor loops the alarm.
   */
  private async advanceOrFail(route: Route, gateway: Gateway, id: string): Promise<void> {
    try {
      await this.advance(route, gateway, id);
    } catch (err) {
      console.error(`conversation ${id}: the pass failed`, err);
      const conv = this.conv(id);
      const reason = err instanceof ConfigError ? `configuration error: ${err.message}` : `internal error: ${err instanceof Error ? err.message : String(err)}`;
      if (conv?.status === "running") this.ctx.storage.transactionSync(() => this.endTurn(conv, "failed", reason));
    }
  }

  private async loadGateway(route: Route): Promise<Gateway> {
    return new Gateway(await effectiveMounts(this.env, route), this.deps.plugins, {
      secret: (name) => secretNamed(this.env, name),
      session: (alias) => this.session(alias),
    });
  }

  private session(alias: string): SessionState {
    const sql = this.sql;
    return {
      get: <T>(key: string) => {
        const row = sql.exec<{ value: string }>("SELECT value FROM mount_sessions WHERE alias = ? AND key = ?", alias, key).toArray()[0];
        return row ? (JSON.parse(row.value) as T) : undefined;
      },
      set: (key, value) => {
        sql.exec("INSERT OR REPLACE INTO mount_sessions (alias, key, value) VALUES (?, ?, ?)", alias, key, JSON.stringify(value));
      },
    };
  }

  /** Advances one conversation until it must wait. */
  private async advance(route: Route, gateway: Gateway, id: string): Promise<void> {
    for (;;) {
      const conv = this.conv(id);
      if (!conv || conv.status !== "running") return;
      if (this.openJob(id)) return; // waiting for the model
      const start = this.turnStart(conv);
      if (start.purpose === "compact") return this.createJob(conv, "compact", JSON.stringify(this.compactionRequest(this.logRows(id))));
      const last = this.logRows(id).filter(isMessageRow).at(-1);
      if (last?.type === "assistant") {
        const message = JSON.parse(last.data) as AssistantMessage;
        const calls = toolCalls(message);
        if (calls.length > 0) {
          if (!(await this.runTools(route, gateway, conv, last.seq, calls))) return;
          continue;
        }
        const steered = this.ctx.storage.transactionSync(() => this.drainInbox(conv));
        if (steered) continue;
        this.ctx.storage.transactionSync(() => this.endTurn(conv, "done", undefined, textOf(message.content)));
        return;
      }
      // Steering and runtime notes (expired holds among them) reach the model before its next call.
      this.ctx.storage.transactionSync(() => {
        this.expireDueHolds(id);
        this.drainInbox(conv);
      });
      const rows = this.logRows(id);
      const model = modelChoice(this.env);
      const body = JSON.stringify({ systemPrompt: systemPrompt(this.env, route, model), messages: modelMessages(rows), tools: gateway.tools() } satisfies ModelRequest);
      if (this.needsCompaction(model, body.length, rows, start.seq)) {
        return this.createJob(conv, "compact", JSON.stringify(this.compactionRequest(rows, start.seq)));
      }
      return this.createJob(conv, "chat", body);
    }
  }

  private drainInbox(conv: ConversationRow): boolean {
    const rows = this.sql.exec<{ type: "user" | "marker"; data: string }>("SELECT type, data FROM inbox WHERE conversation = ? ORDER BY seq", conv.id).toArray();
    for (const row of rows) this.append(conv.id, conv.turn, row.type, JSON.parse(row.data));
    this.sql.exec("DELETE FROM inbox WHERE conversation = ?", conv.id);
    return rows.length > 0;
  }

  /**
   * Performs an assistant message's tool calls in order. Each call is recorded
   * before it runs, so a call found "started" after an eviction is a replay,
   * which the gateway answers by the tool's declared effects.
   */
  private async runTools(route: Route, gateway: Gateway, conv: ConversationRow, assistantSeq: number, calls: ToolCall[]): Promise<boolean> {
    const results: ToolResultMessage[] = [];
    for (const call of calls) {
      const key = toolCallKey(conv.id, assistantSeq, call);
      const record = this.toolCallRecord(key);
      if (record?.status === "done") {
        results.push(JSON.parse(record.result!) as ToolResultMessage);
        continue;
      }
      if (!record && gateway.policy(call.name) === "approval") {
        results.push(this.hold(route, gateway, conv, key, call));
        continue;
      }
      if (!record) {
        this.sql.exec(
          "INSERT INTO tool_calls (key, conversation, turn, name, status, started_at) VALUES (?, ?, ?, ?, 'started', ?)",
          key,
          conv.id,
          conv.turn,
          call.name,
          Date.now(),
        );
      }
      const output = await gateway.call(call.name, call.arguments, { ...route, conversation: conv.id, callKey: key }, { replay: record !== undefined });
      const result = toolResult(call, output);
      this.sql.exec("UPDATE tool_calls SET status = 'done', result = ?, done_at = ? WHERE key = ?", JSON.stringify(result), Date.now(), key);
      results.push(result);
      if (!this.stillRunning(conv)) return false; // interrupted while the tool ran
    }
    this.ctx.storage.transactionSync(() => {
      for (const result of results) this.append(conv.id, conv.turn, "tool_result", result);
    });
    return true;
  }

  /** An approval call becomes a hold and a card; the model is told it is paused, and its turn goes on. */
  private hold(route: Route, gateway: Gateway, conv: ConversationRow, key: string, call: ToolCall): ToolResultMessage {
    const checked = gateway.validate(call.name, call.arguments);
    return this.ctx.storage.transactionSync(() => {
      const result = checked.ok
        ? this.heldResult(
            call,
            this.holds.create({
              conversation: conv.id,
              callKey: key,
              tool: call.name,
              args: JSON.parse(gateway.redact(JSON.stringify(checked.args))),
              ...this.turnStarter(conv),
              ttlMs: approvalTtlMs(this.env),
            }),
          )
        : toolResult(call, checked.output);
      this.sql.exec(
        "INSERT INTO tool_calls (key, conversation, turn, name, status, result, started_at, done_at) VALUES (?, ?, ?, ?, 'done', ?, ?, ?)",
        key,
        conv.id,
        conv.turn,
        call.name,
        JSON.stringify(result),
        Date.now(),
        Date.now(),
      );
      const hold = this.sql.exec<{ id: string }>("SELECT id FROM holds WHERE call_key = ?", key).toArray()[0];
      if (hold) this.postCard(route, hold.id);
      return result;
    });
  }

  /** Who asked: the person whose message started the current turn (none when the runtime started it). */
  private turnStarter(conv: ConversationRow): { requestedBy: string; requester: ChatUser | null } {
    const start = this.sql
      .exec<{ data: string }>("SELECT data FROM log WHERE conversation = ? AND turn = ? AND type = 'turn_start'", conv.id, conv.turn)
      .toArray()[0];
    const by = start ? (JSON.parse(start.data).by as Partial<ChatUser> & { runtime?: boolean }) : undefined;
    if (!by?.platform || !by.id) return { requestedBy: "the agent", requester: null };
    return { requestedBy: by.name ?? by.id, requester: by as ChatUser };
  }

  private stillRunning(conv: ConversationRow): boolean {
    const now = this.conv(conv.id);
    return now?.status === "running" && now.turn === conv.turn;
  }

  private endTurn(conv: ConversationRow, outcome: "done" | "stopped" | "failed" | "compacted", error?: string, reply?: string): void {
    const now = Date.now();
    this.append(conv.id, conv.turn, "turn_end", { outcome, error });
    this.sql.exec(
      "UPDATE conversations SET status = ?, error = ?, updated_at = ? WHERE id = ?",
      outcome === "failed" ? "failed" : "idle",
      error ?? null,
      now,
      conv.id,
    );
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
    if (outcome === "failed" || outcome === "compacted") this.resumeFromInbox(conv.id);
  }

  /** What arrived while a turn that ended early was running starts the next turn, so nothing waits unanswered. */
  private resumeFromInbox(conversation: string): void {
    const first = this.sql.exec<{ seq: number; type: "user" | "marker"; data: string }>("SELECT seq, type, data FROM inbox WHERE conversation = ? ORDER BY seq LIMIT 1", conversation).toArray()[0];
    if (!first) return;
    this.sql.exec("DELETE FROM inbox WHERE seq = ?", first.seq);
    const data = JSON.parse(first.data) as UserData | { text: string };
    this.startTurn(conversation, first.type, data, "by" in data ? (data.by as ChatUser) : { runtime: true });
  }

  // ---- outbox ------------------------------------------------------------------

  /** Written in the caller's transaction; sent by the pass. A turn's status is updated in place. */
  private post(conversation: string, message: OutboundMessage, refKey?: string): void {
    const conv = this.conv(conversation)!;
    if (!conv.reply_to) return; // the Agents API reads the transcript instead
    const key = refKey ?? (message.kind === "status" ? `status:${conversation}:${conv.turn}` : null);
    this.outbox.post(conversation, JSON.parse(conv.reply_to) as ReplyAddress, message, key);
  }

  // ---- alarm -------------------------------------------------------------------

  private async wake(): Promise<void> {
    await this.ctx.storage.setAlarm(Date.now());
  }

  /** Idle means nothing armed: the alarm is set only for work that is due. */
  private async armAlarm(): Promise<void> {
    const due: number[] = [];
    const runnable = this.sql
      .exec("SELECT 1 FROM conversations c WHERE status = 'running' AND NOT EXISTS (SELECT 1 FROM model_jobs j WHERE j.conversation = c.id AND j.status = 'pending') LIMIT 1")
      .toArray();
    if (runnable.length > 0 || this.holds.toPerform().length > 0) due.push(Date.now());
    if (this.sql.exec("SELECT 1 FROM model_jobs WHERE status = 'pending' AND dispatched = 0 LIMIT 1").toArray().length > 0) {
      due.push(Date.now() + REDISPATCH_MS);
    }
    const outbox = this.outbox.nextDue();
    if (outbox !== null) due.push(outbox);
    if (due.length === 0) await this.ctx.storage.deleteAlarm();
    else await this.ctx.storage.setAlarm(Math.min(...due));
  }

  // ---- reads -------------------------------------------------------------------

  private conv(id: string): ConversationRow | undefined {
    return this.sql.exec<ConversationRow>("SELECT * FROM conversations WHERE id = ?", id).toArray()[0];
  }

  private job(id: string): JobRow | undefined {
    return this.sql.exec<JobRow>("SELECT * FROM model_jobs WHERE id = ?", id).toArray()[0];
  }

  private openJob(conversation: string): boolean {
    return this.sql.exec("SELECT 1 FROM model_jobs WHERE conversation = ? AND status = 'pending' LIMIT 1", conversation).toArray().length > 0;
  }

  private statusOf(conv: ConversationRow): ConversationStatus {
    if (conv.status !== "running") return conv.status;
    return this.openJob(conv.id) ? "waiting_model" : "running";
  }

  private logRows(conversation: string): LogRow[] {
    return this.sql.exec<LogRow>("SELECT * FROM log WHERE conversation = ? ORDER BY seq", conversation).toArray();
  }

  private append(conversation: string, turn: number, type: LogType, data: unknown): void {
    this.sql.exec("INSERT INTO log (conversation, turn, type, data, at) VALUES (?, ?, ?, ?, ?)", conversation, turn, type, JSON.stringify(data), Date.now());
  }
}

/** Tool call ids may repeat across turns, so the key includes the assistant message's log position. */
function toolCallKey(conversation: string, assistantSeq: number, call: ToolCall): string {
  return `${conversation}:${assistantSeq}:${call.id}`;
}

function toolCalls(message: AssistantMessage): ToolCall[] {
  return message.content.filter((c): c is ToolCall => c.type === "toolCall");
}

function toolResult(call: ToolCall, output: { text: string; isError?: boolean }): ToolResultMessage {
  return {
    role: "toolResult",
    toolCallId: call.id,
    toolName: call.name,
    content: [{ type: "text", text: output.text }],
    isError: output.isError === true,
    timestamp: Date.now(),
  };
}

function truncate(text: string, max: number): string {
  return text.length > max ? `${text.slice(0, max)}…` : text;
}

function systemPrompt(env: Env, route: Route, model: ModelChoice): string {
  const custom = (env as unknown as Record<string, unknown>).AGENT_SYSTEM_PROMPT;
  if (typeof custom === "string" && custom.trim() !== "") return custom;
  const who = model.kind === "local" ? "the offline local model" : model.model;
  return (
    `You are "${route.agent}", an AI agent that works in a team chat (workspace "${route.tenant}"), running as ${who}. ` +
    "Answer concisely in Markdown. Use the tools you are given when they help; tool names are <mount>__<tool>. " +
    "Messages marked [runtime note] come from the runtime, not the person."
  );
}

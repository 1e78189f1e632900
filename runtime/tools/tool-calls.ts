// Tool calls: one journal row per call, written before the call is made, so a
// call found started after an eviction is a replay (invariant 8). Calls of a
// plugin that runs in the object are made in the pass; any other call is an
// effect a courier performs off the object, with the mount's secret resolved
// there, and its result comes back as an event, like a model reply. A call of
// one of the Responses API caller's own function tools is performed by nobody
// here: its row waits ("awaiting") for the caller's function_call_output, and
// the turn says so in its log once nothing else of the step is left.
import type { AssistantMessage, ImageContent, ToolCall, ToolResultMessage } from "@mariozechner/pi-ai";
import type { CallScope, GatewayResult, ModelTool, Mount } from "../../plugins/index.ts";
import { ConversationRows } from "../../lib/conversation-rows.ts";
import { type AwaitingData, type Conversations, type ConversationRow } from "../store/index.ts";
import type { Effects } from "../effects/index.ts";
import type { LeaseUse } from "./leases.ts";
import type { MountSessions } from "./mount-sessions.ts";
import type { PassContext } from "../pass-context.ts";

/** What a courier needs to perform a call: the mount as it is now (policy included), never a secret value. */
export interface ToolWork {
  mount: Mount;
  tool: string;
  args: unknown;
  scope: CallScope;
  /** An earlier attempt may have performed it: the gateway's replay rule answers. */
  replay: boolean;
  /** A person signed it (a held call). */
  approved: boolean;
  /** The mount's session state; the courier returns it, changed or not. */
  session: Record<string, unknown>;
}

export interface ToolReport {
  result: GatewayResult;
  /** The mount whose session state comes back. */
  alias: string;
  session: Record<string, unknown>;
  /** A leased mount's call (a machine's): how it bears on the conversation's lease. */
  lease?: LeaseUse;
}

/** What the journal asks of delegation (runtime/turns/delegation.ts, above it; the object hands it in). */
export interface Delegations {
  /** A call whose result an event brings later (a child run's end): the calls after it go on meanwhile. */
  answersLater(name: string): boolean;
  /** A call delegation answers itself: `delegate` (started, or refused), or a call a child run may not make; undefined for any other. */
  take(pass: PassContext, conv: ConversationRow, key: string, call: ToolCall): ToolResultMessage | "started" | undefined;
}

type JournalRow = { key: string; conversation: string; turn: number; name: string; call: string; status: "started" | "awaiting" | "done"; result: string | null };

/** Why a caller's function_call_output found no call to answer: none of that id, or one no longer waiting (answered, or its turn stopped). */
export type CallerAnswer = "answered" | "unknown" | "not waiting";

/** The journal of one conversation, as retention archives it (runtime/store/archive.ts). */
export function toolCallRows(sql: SqlStorage): ConversationRows<"tool_calls"> {
  return new ConversationRows(sql, "tool_calls");
}

export class ToolCalls {
  constructor(
    private readonly storage: DurableObjectStorage,
    private readonly conversations: Conversations,
    private readonly effects: Effects,
    private readonly sessions: MountSessions,
    /** Holds a call whose policy says approval (the approvals glue). */
    readonly hold: (pass: PassContext, conv: ConversationRow, key: string, call: ToolCall) => ToolResultMessage,
    /** Delegation's verbs (code mode's calls are refused by them too). */
    readonly delegations: Delegations,
    /** The function tools a Responses API caller declared for the conversation's current turn (runtime/feed/responses.ts). */
    private readonly callerTools: (conv: ConversationRow) => ModelTool[],
  ) {}

  /** The caller's function tools the model is offered beside the agent's own: a name a mount has taken since is the mount's. */
  callerFunctions(pass: PassContext, conv: ConversationRow): ModelTool[] {
    return this.callerTools(conv).filter((tool) => !pass.gateway.mountOf(tool.name));
  }

  /**
   * The caller's output for its function call `callId` of the conversation:
   * the call's result, once (a single transition from awaiting), and the turn
   * goes on at the next pass.
   */
  answerCaller(conversation: string, callId: string, output: string): CallerAnswer {
    const row = this.awaitingRows(conversation).find((r) => (JSON.parse(r.call) as ToolCall).id === callId);
    if (!row) {
      const made = this.storage.sql.exec<{ n: number }>("SELECT EXISTS (SELECT 1 FROM tool_calls WHERE conversation = ? AND json_extract(call, '$.id') = ?) AS n", conversation, callId).one().n;
      return made === 1 ? "not waiting" : "unknown";
    }
    this.finish(row.key, toolResult(JSON.parse(row.call) as ToolCall, { text: output }));
    this.conversations.markForPass(conversation);
    return "answered";
  }

  /** The ids of the conversation's function calls waiting for the caller's output. */
  awaitingCaller(conversation: string): string[] {
    return this.awaitingRows(conversation).map((row) => (JSON.parse(row.call) as ToolCall).id);
  }

  /** The running turn's calls waiting for the caller: a turn that ended (stopped, failed) waits for nobody. */
  private awaitingRows(conversation: string): JournalRow[] {
    const conv = this.conversations.get(conversation);
    if (conv?.status !== "running") return [];
    return this.storage.sql
      .exec<JournalRow>("SELECT * FROM tool_calls WHERE conversation = ? AND turn = ? AND status = 'awaiting' ORDER BY started_at", conversation, conv.turn)
      .toArray();
  }

  row(key: string): JournalRow | undefined {
    return this.storage.sql.exec<JournalRow>("SELECT * FROM tool_calls WHERE key = ?", key).toArray()[0];
  }

  /** The conversation of a journaled call (busy time's attribution: runtime/metering/busy-time.ts). */
  conversationOf(key: string): string | undefined {
    return this.storage.sql.exec<{ conversation: string }>("SELECT conversation FROM tool_calls WHERE key = ?", key).toArray()[0]?.conversation;
  }

  /**
   * Deletes the calls of ended turns done before `before`, at most `limit`;
   * how many went. A running turn's calls stay, however old: its replay reads them.
   */
  pruneDone(before: number, limit: number): number {
    return this.storage.sql
      .exec(
        `DELETE FROM tool_calls WHERE key IN (SELECT t.key FROM tool_calls t WHERE t.status = 'done' AND t.done_at < ?
           AND NOT EXISTS (SELECT 1 FROM json_each(?) r WHERE json_extract(r.value, '$.id') = t.conversation AND json_extract(r.value, '$.turn') = t.turn) LIMIT ?) RETURNING 1`,
        before,
        JSON.stringify(this.conversations.runningTurns()),
        limit,
      )
      .toArray().length;
  }

  /** The stored result of a finished call. */
  result(key: string): ToolResultMessage | undefined {
    const row = this.row(key);
    return row?.status === "done" ? (JSON.parse(row.result!) as ToolResultMessage) : undefined;
  }

  /**
   * Performs an assistant message's calls in order, one at a time: a call in
   * a courier makes the turn wait ("waiting") until its result comes back.
   * Returns "done" once every call has a result, appended to the log together.
   * Delegations start together: the turn waits for their answers after the last call.
   */
  async run(pass: PassContext, conv: ConversationRow, assistantSeq: number, calls: ToolCall[]): Promise<"done" | "waiting" | "stopped"> {
    const results: ToolResultMessage[] = [];
    let answeredLater = false;
    const awaiting: string[] = [];
    // The caller's function tools, read once per step (from the responses table) and only if a call has no row yet.
    let callers: Set<string> | undefined;
    const callersTool = (name: string) => (callers ??= new Set(this.callerFunctions(pass, conv).map((tool) => tool.name))).has(name);
    for (const call of calls) {
      const key = toolCallKey(conv.id, assistantSeq, call);
      const row = this.row(key);
      if (row?.status === "done") {
        results.push(JSON.parse(row.result!) as ToolResultMessage);
        continue;
      }
      if (row?.status === "awaiting" || (!row && callersTool(call.name))) {
        if (!row) this.start(key, conv, call, "awaiting");
        awaiting.push(call.id);
        continue;
      }
      if (row && this.delegations.answersLater(row.name)) {
        answeredLater = true;
        continue;
      }
      if (row) return "waiting"; // its courier has not answered yet
      const taken = this.storage.transactionSync(() => this.delegations.take(pass, conv, key, call));
      if (taken === "started") answeredLater = true;
      else if (taken) results.push(taken);
      if (taken) continue;
      if (pass.gateway.policy(call.name) === "approval") {
        results.push(this.storage.transactionSync(() => this.hold(pass, conv, key, call)));
        continue;
      }
      if (pass.gateway.runsIn(call.name) === "courier") {
        this.storage.transactionSync(() => {
          this.start(key, conv, call);
          this.effects.add("tool", key, conv.id);
        });
        return "waiting";
      }
      // In the object (or unknown: the gateway answers that at once). Started first: an eviction mid-call is a replay.
      const replay = this.row(key) !== undefined;
      if (!replay) this.start(key, conv, call);
      const output = await pass.gateway.call(call.name, call.arguments, callScope(pass, this.conversations, conv, key), { replay });
      const result = toolResult(call, output);
      this.finish(key, result);
      results.push(result);
      if (!this.conversations.stillRunning(conv)) return "stopped"; // interrupted while the tool ran
    }
    // Once only the caller's calls are left, the turn says it waits for them: the response that asked completes there.
    if (awaiting.length > 0 && !answeredLater && !this.conversations.awaitingSince(conv.id, assistantSeq)) {
      this.conversations.append(conv.id, conv.turn, "awaiting", { calls: awaiting } satisfies AwaitingData);
    }
    if (answeredLater || awaiting.length > 0) return "waiting";
    this.storage.transactionSync(() => {
      for (const result of results) this.conversations.append(conv.id, conv.turn, "tool_result", result);
    });
    return "done";
  }

  /** Written before a call is made: found started after an eviction, the call is a replay. */
  start(key: string, conv: ConversationRow, call: ToolCall, status: "started" | "awaiting" = "started"): void {
    this.storage.sql.exec(
      "INSERT INTO tool_calls (key, conversation, turn, name, call, status, started_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
      key,
      conv.id,
      conv.turn,
      call.name,
      JSON.stringify(call),
      status,
      Date.now(),
    );
  }

  finish(key: string, result: ToolResultMessage): void {
    this.storage.sql.exec("UPDATE tool_calls SET status = 'done', result = ?, done_at = ? WHERE key = ?", JSON.stringify(result), Date.now(), key);
  }

  /** A call answered without being performed (held, or refused before it ran). */
  record(key: string, conv: ConversationRow, call: ToolCall, result: ToolResultMessage): void {
    this.start(key, conv, call);
    this.finish(key, result);
  }

  /** A courier's claim of a call: the work, or null when it must not be performed (any more). `replay`: an earlier claim may have performed it. */
  claim(pass: PassContext, key: string, replay: boolean): ToolWork | null {
    const row = this.row(key);
    if (row?.status !== "started") return null;
    const call = JSON.parse(row.call) as ToolCall;
    const conv = this.conversations.get(row.conversation)!;
    // A stopped turn's remaining calls are not performed.
    if (conv.status !== "running" || conv.turn !== row.turn) {
      this.answer(row, { text: "Not performed: the turn was stopped.", isError: true });
      return null;
    }
    const mount = pass.gateway.mountOf(call.name);
    if (!mount) {
      this.answer(row, { text: `Not performed: ${call.name} is no longer mounted.`, isError: true });
      return null;
    }
    return toolWork(callScope(pass, this.conversations, conv, key), call, mount, this.sessions, replay);
  }

  /** A courier's result for a call; a second report of one call changes nothing. */
  report(key: string, report: ToolReport): boolean {
    if (this.row(key)?.status !== "started") return false;
    this.sessions.replace(report.alias, report.session);
    return this.settle(key, report.result);
  }

  /** A call whose couriers never answered: its outcome is unknown, and it is not made again. */
  giveUp(key: string): void {
    this.settle(key, { text: "The tool did not answer in time: its outcome is unknown. Check before trying again.", isError: true });
  }

  /** A started call's result (a courier's, a child run's); false, and nothing changed, once it has one. */
  settle(key: string, output: Parameters<typeof toolResult>[1]): boolean {
    const row = this.row(key);
    if (row?.status !== "started") return false;
    this.answer(row, output);
    return true;
  }

  private answer(row: JournalRow, output: Parameters<typeof toolResult>[1]): void {
    this.finish(row.key, toolResult(JSON.parse(row.call) as ToolCall, output));
    this.effects.done("tool", row.key);
    this.conversations.markForPass(row.conversation);
  }

  /** A provider rejects an assistant tool call without a result, so a stopped batch gets results. */
  closeOpen(conv: ConversationRow): void {
    const last = this.conversations.lastMessage(conv.id);
    if (!last || last.type !== "assistant") return;
    for (const call of toolCalls(JSON.parse(last.data) as AssistantMessage)) {
      const key = toolCallKey(conv.id, last.seq, call);
      const row = this.row(key);
      // A courier call still on the queue will never be performed: its claim is refused.
      const underway = row?.status === "started" && (this.effects.get("tool", key)?.claims ?? 1) > 0;
      const result =
        this.result(key) ??
        toolResult(call, { text: underway ? "Interrupted while running: the outcome is unknown." : "Not performed: the turn was stopped.", isError: true });
      // A call the caller never answered is closed too: an output sent later finds it no longer waiting.
      if (row?.status === "awaiting") this.finish(key, result);
      this.conversations.append(conv.id, conv.turn, "tool_result", result);
    }
  }
}

/** What a courier performs for a call not held for approval: the mount as it is now, never a secret value. */
export function toolWork(scope: CallScope, call: ToolCall, mount: Mount, sessions: MountSessions, replay: boolean): ToolWork {
  return { mount, tool: call.name, args: call.arguments, scope, replay, approved: false, session: sessions.snapshot(mount.alias) };
}

export function callScope(pass: PassContext, conversations: Conversations, conv: ConversationRow, key: string): CallScope {
  return { ...pass.route, conversation: conv.id, callKey: key, audience: conversations.audienceOf(pass.route, conv) };
}

/** Tool call ids may repeat across turns, so the key includes the assistant message's log position. */
export function toolCallKey(conversation: string, assistantSeq: number, call: ToolCall): string {
  return `${conversation}:${assistantSeq}:${call.id}`;
}

export function toolCalls(message: AssistantMessage): ToolCall[] {
  return message.content.filter((c): c is ToolCall => c.type === "toolCall");
}

export function toolResult(call: ToolCall, output: { text: string; isError?: boolean; images?: ImageContent[] }): ToolResultMessage {
  return {
    role: "toolResult",
    toolCallId: call.id,
    toolName: call.name,
    // A courier's tool hands its images over stored (runtime/store/pictures.ts): their bytes stay in R2.
    content: [{ type: "text", text: output.text }, ...(output.images ?? [])],
    isError: output.isError === true,
    timestamp: Date.now(),
  };
}

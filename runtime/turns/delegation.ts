// Subagents: a parent's `delegate` call starts a child run, a conversation of
// this same object (`<parent>~child-<n>`) with its own turn. The parent's turn
// waits on the call's journal row like on any tool call, but no effect and no
// courier stands behind it: the child's turn end answers the call, once, in
// the transaction that ends the child (a row state running → answered). At
// most CHILDREN_AT_ONCE children of one parent turn run; the rest wait queued
// for a slot. A child is offered its mounts' tools and never `delegate`; its
// turn has a step limit (model calls) and a time limit. Stopping the parent
// stops its children first; a child stopped or failed answers "stopped" or
// its failure, so no parent waits forever.
import type { ToolCall, ToolResultMessage } from "@mariozechner/pi-ai";
import type { Gateway, ModelTool } from "../../plugins/index.ts";
import type { ChatUser, ReplyAddress } from "../chat.ts";
import type { Conversations, ConversationRow, TurnStart } from "../store/index.ts";
import { toolResult, type Delegations, type ToolCalls } from "../tools/index.ts";
import type { Children, TurnOutcome } from "./children.ts";
import type { Turns } from "./turns.ts";
import type { PassContext } from "../pass-context.ts";
import { childMaxSteps, childTurnMs } from "./config.ts";
import { CHILDREN_AT_ONCE, childId, DELEGATE, delegateArgs, delegateTool } from "./delegate-tool.ts";

type DelegationRow = {
  call_key: string;
  conversation: string;
  turn: number;
  child: string;
  task: string;
  mounts: string | null;
  state: "queued" | "running" | "answered";
  created_at: number;
  /** The child's turn limit (DELEGATE_TURN_MINUTES), read when the call was made: a bad value fails the parent's turn, not a child's end. */
  turn_ms: number;
  /** When a running child's turn is stopped (DELEGATE_TURN_MINUTES after it started). */
  deadline: number | null;
};

/** A conversation's place in a family, for the console and the Agents API. */
export interface Family {
  /** The conversation whose `delegate` call started this one, if it is a child run. */
  parent: string | null;
  children: { id: string; state: DelegationRow["state"]; task: string }[];
}

export class Delegation implements Children, Delegations {
  constructor(
    private readonly sql: SqlStorage,
    private readonly env: Env,
    private readonly conversations: Conversations,
    private readonly tools: ToolCalls,
    /** The turn machine, made after this (it is handed this as its Children). */
    private readonly turns: () => Turns,
  ) {}

  // ---- the tool-call journal's verbs (runtime/tools/tool-calls.ts) ----------------------

  answersLater(name: string): boolean {
    return name === DELEGATE;
  }

  take(pass: PassContext, conv: ConversationRow, key: string, call: ToolCall): ToolResultMessage | "started" | undefined {
    const own = this.rowOfChild(conv.id);
    if (call.name !== DELEGATE) {
      const alias = pass.gateway.mountOf(call.name)?.alias;
      if (!own?.mounts || alias === undefined || this.mountsOf(own)!.includes(alias)) return undefined;
      return this.refuse(key, conv, call, `Not performed: mount "${alias}" is not one of this child run's mounts.`);
    }
    if (own) return this.refuse(key, conv, call, "Refused: a child run cannot delegate. Do the task yourself.");
    const args = delegateArgs.safeParse(call.arguments);
    if (!args.success) return this.refuse(key, conv, call, `Invalid arguments for ${DELEGATE}: ${args.error.issues.map((i) => i.message).join("; ")}`);
    const known = aliasesOf(pass.gateway);
    const unknown = (args.data.mounts ?? []).filter((alias) => !known.includes(alias));
    if (unknown.length > 0) return this.refuse(key, conv, call, `Refused: no mount named ${unknown.join(", ")}; the mounts are ${known.join(", ") || "none"}.`);
    const turnMs = childTurnMs(this.env);
    this.tools.start(key, conv, call);
    const n = this.sql.exec<{ n: number }>("SELECT COUNT(*) AS n FROM delegations WHERE conversation = ?", conv.id).one().n + 1;
    this.sql.exec(
      "INSERT INTO delegations (call_key, conversation, turn, child, task, mounts, state, created_at, turn_ms) VALUES (?, ?, ?, ?, ?, ?, 'queued', ?, ?)",
      key,
      conv.id,
      conv.turn,
      childId(conv.id, n),
      args.data.instructions,
      args.data.mounts ? JSON.stringify(args.data.mounts) : null,
      Date.now(),
      turnMs,
    );
    this.fill(conv);
    return "started";
  }

  private refuse(key: string, conv: ConversationRow, call: ToolCall, text: string): ToolResultMessage {
    const result = toolResult(call, { text, isError: true });
    this.tools.record(key, conv, call, result);
    return result;
  }

  // ---- the turn machine's verbs (runtime/turns/children.ts) ------------------------------

  toolsOf(conv: ConversationRow, gateway: Gateway): ModelTool[] {
    const own = this.rowOfChild(conv.id);
    if (!own) return [...gateway.tools(), delegateTool];
    const mounts = this.mountsOf(own);
    return mounts ? gateway.tools().filter((tool) => mounts.includes(gateway.mountOf(tool.name)!.alias)) : gateway.tools();
  }

  isChild(conv: ConversationRow): boolean {
    return this.rowOfChild(conv.id) !== undefined;
  }

  limitReached(conv: ConversationRow): string | null {
    if (!this.isChild(conv)) return null;
    const max = childMaxSteps(this.env);
    return this.conversations.repliesInTurn(conv) >= max ? `the child run reached its step limit (DELEGATE_MAX_STEPS = ${max} model calls) before it finished` : null;
  }

  ended(conv: ConversationRow, outcome: TurnOutcome, text: string): void {
    // A parent's turn that ended without being cut (failed in its pass) leaves no child running or waiting either.
    this.cut(conv);
    const row = this.sql.exec<DelegationRow>("SELECT * FROM delegations WHERE child = ? AND state = 'running'", conv.id).toArray()[0];
    if (!row) return; // not a child, or a later turn of one (a decided hold woke it): its answer was given
    const output =
      outcome === "done"
        ? { text: text.trim() || "(The child run finished without saying anything.)" }
        : outcome === "stopped"
          ? { text: "The child run was stopped before it finished.", isError: true }
          : { text: `The child run failed: ${text}`, isError: true }; // no compaction or second message ends a delegated turn
    this.answer(row, output);
    const parent = this.conversations.get(row.conversation);
    if (parent?.status === "running" && parent.turn === row.turn) this.fill(parent);
  }

  cut(conv: ConversationRow): void {
    // The queued first: a slot a stopped child frees must not start one.
    for (const row of this.ofTurn(conv, "queued")) this.answer(row, { text: "Not performed: the turn was stopped.", isError: true });
    for (const row of this.ofTurn(conv, "running")) this.turns().interrupt(row.child);
  }

  surfaceOf(conv: ConversationRow): ReplyAddress | null {
    const own = this.rowOfChild(conv.id);
    const parent = own && this.conversations.get(own.conversation);
    return parent ? this.conversations.replyAddress(parent) : null;
  }

  // ---- the time limit: the object's alarm is due at the earliest deadline --------------

  nextDue(): number | null {
    return this.sql.exec<{ at: number | null }>("SELECT MIN(deadline) AS at FROM delegations WHERE state = 'running'").one().at;
  }

  /** Children past their deadline are stopped, their parents told why (in the caller's transaction). */
  expireDue(): void {
    const due = this.sql.exec<DelegationRow>("SELECT * FROM delegations WHERE state = 'running' AND deadline <= ?", Date.now()).toArray();
    for (const row of due) this.turns().interrupt(row.child, "the child run reached its time limit (DELEGATE_TURN_MINUTES) before it finished");
  }

  /** Its parent and its children, for the console and the Agents API. */
  family(conversation: string): Family {
    const children = this.sql
      .exec<DelegationRow>("SELECT * FROM delegations WHERE conversation = ? ORDER BY created_at, rowid", conversation)
      .toArray()
      .map((row) => ({ id: row.child, state: row.state, task: row.task }));
    return { parent: this.rowOfChild(conversation)?.conversation ?? null, children };
  }

  // ---- rows ---------------------------------------------------------------------------

  /** Starts queued children of `parent`'s turn while fewer than CHILDREN_AT_ONCE run. */
  private fill(parent: ConversationRow): void {
    let running = this.ofTurn(parent, "running").length;
    for (const row of this.ofTurn(parent, "queued")) {
      if (running >= CHILDREN_AT_ONCE) return;
      running++;
      this.start(parent, row);
    }
  }

  private start(parent: ConversationRow, row: DelegationRow): void {
    const now = Date.now();
    const by = personOf(parent, this.conversations.turnStart(parent).start);
    this.sql.exec("UPDATE delegations SET state = 'running', deadline = ? WHERE call_key = ?", now + row.turn_ms, row.call_key);
    this.turns().message(this.conversations.create(row.child, by, now), row.task, by);
  }

  /** The parent's call gets its result, once; its turn goes on at the next pass. */
  private answer(row: DelegationRow, output: { text: string; isError?: boolean }): void {
    this.sql.exec("UPDATE delegations SET state = 'answered' WHERE call_key = ?", row.call_key);
    this.tools.settle(row.call_key, output);
  }

  private ofTurn(parent: ConversationRow, state: DelegationRow["state"]): DelegationRow[] {
    return this.sql
      .exec<DelegationRow>("SELECT * FROM delegations WHERE conversation = ? AND turn = ? AND state = ? ORDER BY created_at, rowid", parent.id, parent.turn, state)
      .toArray();
  }

  private rowOfChild(child: string): DelegationRow | undefined {
    return this.sql.exec<DelegationRow>("SELECT * FROM delegations WHERE child = ?", child).toArray()[0];
  }

  private mountsOf(row: DelegationRow): string[] | null {
    return row.mounts ? (JSON.parse(row.mounts) as string[]) : null;
  }
}

/** The mounts the model can reach, by alias. */
function aliasesOf(gateway: Gateway): string[] {
  return [...new Set(gateway.tools().map((tool) => gateway.mountOf(tool.name)!.alias))];
}

/** A child acts for the person who started its parent's turn (they may decide its held calls); else for the parent's starter. */
function personOf(parent: ConversationRow, start: TurnStart): ChatUser {
  return "by" in start && "platform" in start.by ? start.by : (JSON.parse(parent.started_by) as ChatUser);
}

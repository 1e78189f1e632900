// Code mode, the object's side: the tool calls a script makes, claimed one by
// one by the courier running it, decided here under the mounts' policies as
// they are now and journaled under the script's own call key, so a re-run
// gets the recorded answers back (docs/design.md, "Scripts").
import type { ToolCall, ToolResultMessage } from "@mariozechner/pi-ai";
import * as z from "zod";
import type { Holds } from "../../approvals/index.ts";
import type { ToolOutput } from "../../plugins/index.ts";
import { type Conversations, type ConversationRow, textOf } from "../store/index.ts";
import type { MountSessions } from "./mount-sessions.ts";
import { callScope, toolResult, toolWork, type ToolCalls, type ToolReport, type ToolWork } from "./tool-calls.ts";
import type { PassContext } from "../pass-context.ts";

/** The object's answer to one call of a script: the call's result, or the work for the courier to perform. */
export type ScriptAnswer = { kind: "answer"; output: ToolOutput } | { kind: "perform"; work: ToolWork };

export const scriptCallSchema = z.object({
  /** The journal key of the script's own call. */
  parentKey: z.string().min(1),
  /** 1 for the script's first call, in the order it made them. */
  n: z.number().int().positive().max(1_000),
  alias: z.string().max(200),
  tool: z.string().max(200),
  args: z.unknown(),
});
export type ScriptCall = z.infer<typeof scriptCallSchema>;

/** The object's side. */
export class ScriptCalls {
  constructor(
    private readonly storage: DurableObjectStorage,
    private readonly conversations: Conversations,
    private readonly tools: ToolCalls,
    private readonly holds: Holds,
    private readonly sessions: MountSessions,
    /** A pass sends what a hold posted (its card). */
    private readonly wake: () => void,
  ) {}

  async call(pass: PassContext, request: ScriptCall): Promise<ScriptAnswer> {
    const parsed = scriptCallSchema.safeParse(request);
    if (!parsed.success) return refused(`Not performed: a malformed tool call (${z.prettifyError(parsed.error)}).`);
    const { parentKey, n, alias, tool, args } = parsed.data;
    const parent = this.parent(parentKey);
    if (typeof parent === "string") return refused(parent);
    const { gateway } = pass;
    const name = gateway.nameOf(alias, tool);
    const key = `${parentKey}/${n}`;
    const call: ToolCall = { type: "toolCall", id: `${parent.callId}/${n}`, name, arguments: (args ?? {}) as Record<string, unknown> };

    const row = this.tools.row(key);
    if (row && (row.name !== name || JSON.stringify((JSON.parse(row.call) as ToolCall).arguments) !== JSON.stringify(call.arguments))) {
      return refused(`Not performed: call ${n} of this script is not the call ${n} its earlier run made (${row.name}). A script that is run again must make the same calls in the same order.`);
    }
    if (row?.status === "done") return recorded(this.tools.result(key)!);
    // An unknown name does nothing, so it is answered without a journal row.
    const where = gateway.runsIn(name);
    if (!where) return refused(`No tool ${alias}.${tool} is mounted. Nearest: ${gateway.nearest(alias, tool).join(", ") || "none"}.`);
    if (gateway.callsTools(name)) return refused(`Not performed: ${alias}.${tool} runs scripts itself, and a script cannot start another.`);
    // Started by an earlier run of the script and never answered: the replay rule decides.
    if (row) return where === "courier" ? this.handOver(pass, parent.conv, key, call, true) : this.inObject(pass, parent.conv, key, call, true);

    // A child run's script reaches only the child's mounts, as its direct calls do (runtime/turns/delegation.ts).
    const outside = this.storage.transactionSync(() => this.tools.delegations.take(pass, parent.conv, key, call));
    if (outside && outside !== "started") return recorded(outside);
    const checked = gateway.validate(name, call.arguments);
    if (!checked.ok) return this.record(parent.conv, key, call, checked.output);
    switch (gateway.policy(name)) {
      case "deny":
        return this.record(parent.conv, key, call, { text: gateway.refusal(name), isError: true });
      case "approval": {
        const held = this.storage.transactionSync(() => this.tools.hold(pass, parent.conv, key, call));
        this.wake();
        return recorded(held);
      }
    }
    if (where === "courier") {
      this.tools.start(key, parent.conv, call);
      return this.handOver(pass, parent.conv, key, call, false);
    }
    return this.inObject(pass, parent.conv, key, call, false);
  }

  /** The courier's result for a call it performed; answered with what the journal holds (a second report changes nothing). */
  report(key: string, report: ToolReport): ToolOutput {
    // Only a script's call is reported here (a direct call's report ends its effect too: ToolCalls.report).
    const row = /\/\d+$/.test(key) ? this.tools.row(key) : undefined;
    if (!row) return { text: "Not recorded: there is no such call of a script.", isError: true };
    if (row.status === "started") {
      this.sessions.replace(report.alias, report.session);
      this.tools.finish(key, toolResult(JSON.parse(row.call) as ToolCall, report.result));
    }
    return recorded(this.tools.result(key)!).output;
  }

  /** The script's own call: running in a courier for the current turn, or an approved hold being performed. */
  private parent(key: string): { conv: ConversationRow; callId: string } | string {
    const row = this.tools.row(key);
    if (!row) return "Not performed: the script's own call is not known.";
    const conv = this.conversations.get(row.conversation)!;
    const hold = this.holds.byCallKey(key);
    const running = hold ? hold.status === "running" : row.status === "started" && conv.status === "running" && conv.turn === row.turn;
    if (!running) return "Not performed: the script is no longer running (its turn was stopped, or its call was already answered).";
    return { conv, callId: (JSON.parse(row.call) as ToolCall).id };
  }

  private record(conv: ConversationRow, key: string, call: ToolCall, output: ToolOutput): ScriptAnswer {
    this.tools.record(key, conv, call, toolResult(call, output));
    return answered(output.text, output.isError);
  }

  /** What the courier performs: the mount as it is now, never a secret value. */
  private handOver(pass: PassContext, conv: ConversationRow, key: string, call: ToolCall, replay: boolean): ScriptAnswer {
    return { kind: "perform", work: toolWork(callScope(pass, this.conversations, conv, key), call, pass.gateway.mountOf(call.name)!, this.sessions, replay) };
  }

  /** A plugin that runs in the object (the agent's own state): performed here, started first so an eviction mid-call is a replay. */
  private async inObject(pass: PassContext, conv: ConversationRow, key: string, call: ToolCall, replay: boolean): Promise<ScriptAnswer> {
    if (!replay) this.tools.start(key, conv, call);
    const output = await pass.gateway.call(call.name, call.arguments, callScope(pass, this.conversations, conv, key), { replay });
    this.tools.finish(key, toolResult(call, output));
    return answered(output.text, output.isError);
  }
}

function answered(text: string, isError: boolean | undefined): ScriptAnswer {
  return { kind: "answer", output: { text, isError: isError === true } };
}

function recorded(result: ToolResultMessage): Extract<ScriptAnswer, { kind: "answer" }> {
  return { kind: "answer", output: { text: textOf(result.content), isError: result.isError } };
}

function refused(text: string): ScriptAnswer {
  return answered(text, true);
}

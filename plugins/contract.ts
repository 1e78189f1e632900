// The plugin contract: what a plugin declares and what the gateway hands it.
import type { z } from "zod";

/** "read" changes nothing outside; "write" does. */
export type SideEffects = "read" | "write";
/** "idempotent": performing it twice with the same key is the same as once. */
export type Idempotency = "idempotent" | "never";

/** Per-mount state that lasts across calls and conversations (a cookie, a cursor). */
export interface SessionState {
  get<T = unknown>(key: string): T | undefined;
  set(key: string, value: unknown): void;
}

export interface ToolContext {
  /** Stable for one tool call across replays: use it as an idempotency key. */
  callKey: string;
  tenant: string;
  agent: string;
  conversation: string;
  /** The mount's own config (never shown to the model). */
  config: Record<string, unknown>;
  /** The mount's `secret_ref`, resolved at call time. Never put it in the output: the gateway redacts it anyway. */
  secret?: string;
  session: SessionState;
  /**
   * Given only to a tool that declares `callsTools` (code mode): calls other
   * mounted tools through the gateway, each under its mount's policy and
   * recorded in the agent's journal under this call's key.
   */
  tools?: ToolCaller;
}

export interface ToolOutput {
  text: string;
  isError?: boolean;
}

export interface ToolCaller {
  /**
   * Calls `<alias>__<tool>`. Resolves with the gateway's answer (a refusal, an
   * unknown name and a held call are answers too, `isError` where nothing was
   * performed as asked). Rejects only when the runtime itself could not be
   * reached: the caller should stop, and the call is tried again later.
   */
  call(alias: string, tool: string, args: unknown): Promise<ToolOutput>;
}

/** A mounted tool that a tool with `callsTools` may call, as it is told when the tool list is built. */
export interface CallableTool {
  alias: string;
  tool: string;
  description: string;
  /** The tool's parameters as JSON Schema. */
  parameters: Record<string, unknown>;
  sideEffects: SideEffects;
  /** "approval": a call makes a hold and is answered that it waits for a person. */
  policy: "allow" | "approval";
}

export interface PluginTool<Args = any> {
  name: string;
  description: string;
  parameters: z.ZodType<Args>;
  sideEffects: SideEffects;
  idempotency: Idempotency;
  call(args: Args, ctx: ToolContext): Promise<ToolOutput>;
  /**
   * The tool calls other tools through `ctx.tools` (code mode). Given the
   * tools it may call (every mounted tool not denied, except other tools that
   * call tools) and its mount's config, returns its description for the model.
   */
  callsTools?: (callable: CallableTool[], config: Record<string, unknown>) => string;
}

export interface Plugin {
  name: string;
  description: string;
  tools: PluginTool[];
  /**
   * Where its calls run. "object": inside the agent's object, for plugins that
   * only touch the agent's own state (no network, bounded CPU). Otherwise (the
   * default) in a courier, off the object: anything that waits on the network
   * or may run long must never hold up the agent's other conversations.
   */
  runsIn?: "object";
  /** Tools a person must sign even on an otherwise open mount (lifted only by the mount's per-tool entry). */
  defaultPolicy?: Record<string, "approval">;
  /** Validates the mount's `config`; a bad config is reported at start-up of the pass, by alias. */
  config?: z.ZodType<Record<string, unknown>>;
}

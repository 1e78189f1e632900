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

/**
 * Who can read a conversation: one person in a direct message, or anyone in
 * the workspace's channels (runtime/audience.ts decides, per platform).
 */
export type Audience = { kind: "dm"; person: string } | { kind: "channel" };

export interface ToolContext {
  /** Stable for one tool call across replays: use it as an idempotency key. */
  callKey: string;
  tenant: string;
  agent: string;
  conversation: string;
  audience: Audience;
  /** The mount's own config (never shown to the model). */
  config: Record<string, unknown>;
  /** The mount's `secret_ref`, resolved at call time. Never put it in the output: the gateway redacts it anyway. */
  secret?: string;
  session: SessionState;
}

export interface ToolOutput {
  text: string;
  isError?: boolean;
}

export interface PluginTool<Args = any> {
  name: string;
  description: string;
  parameters: z.ZodType<Args>;
  sideEffects: SideEffects;
  idempotency: Idempotency;
  call(args: Args, ctx: ToolContext): Promise<ToolOutput>;
}

/** What a plugin's standing document is read with. */
export interface StandingContext {
  alias: string;
  config: Record<string, unknown>;
  session: SessionState;
  audience: Audience;
}

/**
 * A document the model always has (memory's notes): the runtime puts it in a
 * conversation's system prompt when the conversation starts (and again after a
 * compaction), and tells the model of later changes in a short note, so the
 * system prompt stays the same request after request.
 */
export interface StandingDocument {
  /** The document's lines as they are now, for a conversation of this audience. */
  lines(ctx: StandingContext): string[];
  /** The lines as the system prompt shows them, within the plugin's own budget. */
  render(lines: string[], ctx: Omit<StandingContext, "session">): string;
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
  standing?: StandingDocument;
  /** Validates the mount's `config`; a bad config is reported at start-up of the pass, by alias. */
  config?: z.ZodType<Record<string, unknown>>;
}

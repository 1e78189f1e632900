// The plugin contract: what a plugin declares and what the gateway hands it.
import type { z } from "zod";

/** "read" changes nothing outside; "write" does. */
export type SideEffects = "read" | "write";
/** "idempotent": performing it twice with the same key is the same as once. */
export type Idempotency = "idempotent" | "never";

export interface ToolContext {
  /** Stable for one tool call across replays: use it as an idempotency key. */
  callKey: string;
  tenant: string;
  agent: string;
  conversation: string;
  /** The mount's own config (never shown to the model). */
  config: Record<string, unknown>;
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

export interface Plugin {
  name: string;
  description: string;
  tools: PluginTool[];
}

// The gateway: the only way a model's tool call reaches the outside. It maps
// `<alias>__<tool>` to a mounted plugin, validates arguments, and applies the
// replay rule of invariant 8.
import { z } from "zod";
import type { Idempotency, Plugin, PluginTool, SideEffects, ToolOutput } from "./contract.ts";

const decision = z.enum(["allow", "deny", "approval"]);
export const mountSchema = z.object({
  alias: z.string().regex(/^[a-z][a-z0-9_]{0,30}$/, "alias: lower-case letters, digits and _ (max 31)"),
  plugin: z.string(),
  config: z.record(z.string(), z.unknown()).default({}),
  secret_ref: z.string().optional(),
  policy: z
    .object({ read: decision.optional(), write: decision.optional(), tools: z.record(z.string(), decision).optional() })
    .optional(),
});
export type Mount = z.infer<typeof mountSchema>;

export interface ModelTool {
  name: string;
  description: string;
  parameters: Record<string, unknown>;
}

export interface CallScope {
  tenant: string;
  agent: string;
  conversation: string;
  callKey: string;
}

interface Resolved {
  mount: Mount;
  tool: PluginTool;
}

const SEPARATOR = "__";

export class Gateway {
  private readonly byName = new Map<string, Resolved>();

  constructor(mounts: Mount[], plugins: readonly Plugin[]) {
    for (const mount of mounts) {
      const plugin = plugins.find((p) => p.name === mount.plugin);
      if (!plugin) throw new Error(`MOUNTS: alias "${mount.alias}" names unknown plugin "${mount.plugin}"`);
      for (const tool of plugin.tools) this.byName.set(`${mount.alias}${SEPARATOR}${tool.name}`, { mount, tool });
    }
  }

  /** What the model sees: one tool per mounted plugin tool, named `<alias>__<tool>`. */
  tools(): ModelTool[] {
    return [...this.byName].map(([name, { mount, tool }]) => ({
      name,
      description: `${tool.description} (mount "${mount.alias}")`,
      parameters: z.toJSONSchema(tool.parameters) as Record<string, unknown>,
    }));
  }

  effects(name: string): { sideEffects: SideEffects; idempotency: Idempotency } | undefined {
    const found = this.byName.get(name);
    return found && { sideEffects: found.tool.sideEffects, idempotency: found.tool.idempotency };
  }

  /**
   * Performs a call. `replay` is true when an earlier attempt of this very call
   * may have run (the object was evicted mid-call): a read replays freely, an
   * idempotent write replays with its key, anything else is answered unknown.
   */
  async call(name: string, args: unknown, scope: CallScope, replay = false): Promise<ToolOutput> {
    const found = this.byName.get(name);
    if (!found) return { text: `Unknown tool "${name}". Available: ${[...this.byName.keys()].join(", ") || "none"}`, isError: true };
    const { mount, tool } = found;
    if (replay && tool.sideEffects === "write" && tool.idempotency === "never") {
      return {
        text: `The outcome of ${name} is unknown: it was started but the runtime restarted before it answered, and it is not safe to repeat. Check before trying again.`,
        isError: true,
      };
    }
    const parsed = tool.parameters.safeParse(args);
    if (!parsed.success) return { text: `Invalid arguments for ${name}: ${z.prettifyError(parsed.error)}`, isError: true };
    try {
      return await tool.call(parsed.data, { ...scope, config: mount.config });
    } catch (err) {
      return { text: `${name} failed: ${err instanceof Error ? err.message : String(err)}`, isError: true };
    }
  }
}

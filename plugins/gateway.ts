// The gateway: the only way a model's tool call reaches the outside. It maps
// `<alias>__<tool>` to a mounted plugin, applies the mount's policy, resolves
// the mount's secret at call time, redacts secrets from what comes back, and
// applies the replay rule of invariant 8.
import { z } from "zod";
import { evaluatePolicy, mountPolicy, type MountUnderPolicy, type PolicyDecision } from "./policy.ts";
import { nearest } from "../lib/nearest.ts";
import type { CallableTool, Idempotency, Plugin, PluginTool, SessionState, SideEffects, ToolCaller, ToolOutput } from "./contract.ts";
import { Redactor } from "./redact.ts";

export const mountSchema = z.object({
  alias: z.string().regex(/^[a-z][a-z0-9_]{0,30}$/, "alias: lower-case letters, digits and _ (max 31)"),
  plugin: z.string(),
  config: z.record(z.string(), z.unknown()).default({}),
  /** The NAME of a Worker secret, resolved only when a call is made. */
  secret_ref: z.string().regex(/^[A-Z][A-Z0-9_]*$/, "secret_ref names a Worker secret (UPPER_SNAKE_CASE)").optional(),
  policy: mountPolicy.optional(),
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

/** A mount that cannot be used as configured (unknown plugin, bad config). */
export class MountError extends Error {
  override name = "MountError";
}

/** How a call ended, for callers that must tell "refused" or "unknown" from "performed". */
export type Disposition = "performed" | "refused" | "unknown" | "invalid";
export type GatewayResult = ToolOutput & { disposition: Disposition };

export interface GatewayDeps {
  secret(name: string): string | undefined;
  session(alias: string): SessionState;
  /** How a tool that calls tools (code mode) reaches the others; without it, such a tool gets none. */
  caller?(scope: CallScope): ToolCaller;
}

interface Resolved {
  mount: Mount;
  plugin: Plugin;
  tool: PluginTool;
  /** The mount's config as the plugin parsed it. */
  config: Record<string, unknown>;
}

const SEPARATOR = "__";
/** What one call may put in the transcript (and so in SQLite and the next model request). */
const MAX_RESULT_CHARS = 64_000;

/**
 * A tool's parameters as JSON Schema, made once per tool (the tool list is
 * built for every model request). As input: what a caller may send, so a field
 * with a default is optional.
 */
const schemas = new WeakMap<PluginTool, Record<string, unknown>>();
function parametersOf(tool: PluginTool): Record<string, unknown> {
  let schema = schemas.get(tool);
  if (!schema) schemas.set(tool, (schema = z.toJSONSchema(tool.parameters, { io: "input" }) as Record<string, unknown>));
  return schema;
}

export class Gateway {
  private readonly byName = new Map<string, Resolved>();
  private readonly redactor: Redactor;

  constructor(
    private readonly mounts: Mount[],
    plugins: readonly Plugin[],
    private readonly deps: GatewayDeps,
  ) {
    for (const mount of mounts) {
      const plugin = plugins.find((p) => p.name === mount.plugin);
      if (!plugin) throw new MountError(`MOUNTS: alias "${mount.alias}" names unknown plugin "${mount.plugin}"`);
      const parsed = plugin.config ? plugin.config.safeParse(mount.config) : { success: true as const, data: mount.config };
      if (!parsed.success) throw new MountError(`MOUNTS: alias "${mount.alias}" has a bad config: ${z.prettifyError(parsed.error)}`);
      for (const tool of plugin.tools) this.byName.set(`${mount.alias}${SEPARATOR}${tool.name}`, { mount, plugin, tool, config: parsed.data });
    }
    const secrets = mounts.flatMap((m) => (m.secret_ref ? [deps.secret(m.secret_ref)] : [])).filter((s): s is string => !!s);
    this.redactor = new Redactor(secrets);
  }

  /** What the model sees: one tool per mounted plugin tool, named `<alias>__<tool>`. */
  tools(): ModelTool[] {
    const callable = this.callable();
    return [...this.byName].map(([name, { mount, tool, config }]) => ({
      name,
      description: `${tool.callsTools ? tool.callsTools(callable, config) : tool.description} (mount "${mount.alias}")`,
      parameters: parametersOf(tool),
    }));
  }

  /** The tools a tool that calls tools may call: every one not denied, except those that call tools themselves. */
  callable(): CallableTool[] {
    return [...this.byName].flatMap(([name, { mount, tool }]) => {
      const policy = this.policy(name);
      if (tool.callsTools || policy === "deny") return [];
      return [{ alias: mount.alias, tool: tool.name, description: tool.description, parameters: parametersOf(tool), sideEffects: tool.sideEffects, policy: policy! }];
    });
  }

  /** The gateway name of a mount's tool: `<alias>__<tool>`. */
  nameOf(alias: string, tool: string): string {
    return `${alias}${SEPARATOR}${tool}`;
  }

  /** Whether a tool calls other tools (a script may not start another script). */
  callsTools(name: string): boolean {
    return this.byName.get(name)?.tool.callsTools !== undefined;
  }

  /** The callable tools whose `alias.tool` is nearest to the one asked for, nearest first. */
  nearest(alias: string, tool: string): string[] {
    return nearest(`${alias}.${tool}`, this.callable().map((c) => `${c.alias}.${c.tool}`), 3);
  }

  effects(name: string): { sideEffects: SideEffects; idempotency: Idempotency } | undefined {
    const found = this.byName.get(name);
    return found && { sideEffects: found.tool.sideEffects, idempotency: found.tool.idempotency };
  }

  /** Whether a call runs inside the agent's object or in a courier; undefined for an unknown tool. */
  runsIn(name: string): "object" | "courier" | undefined {
    const found = this.byName.get(name);
    return found && (found.plugin.runsIn ?? "courier");
  }

  /** The mount a tool belongs to (a courier performs the call with just this mount). */
  mountOf(name: string): Mount | undefined {
    return this.byName.get(name)?.mount;
  }

  /** The mount's policy for this tool as it is now; undefined for an unknown tool. */
  policy(name: string): PolicyDecision | undefined {
    const found = this.byName.get(name);
    if (!found) return undefined;
    const { mount, plugin, tool } = found;
    return evaluatePolicy(mount.policy, { name: tool.name, sideEffects: tool.sideEffects, pluginDefault: plugin.defaultPolicy?.[tool.name] });
  }

  mountsUnderPolicy(): MountUnderPolicy[] {
    return this.mounts.map((mount) => {
      const tools = [...this.byName.values()].filter((r) => r.mount === mount);
      return {
        alias: mount.alias,
        plugin: mount.plugin,
        policy: mount.policy,
        tools: tools.map(({ plugin, tool }) => ({ name: tool.name, sideEffects: tool.sideEffects, pluginDefault: plugin.defaultPolicy?.[tool.name] })),
      };
    });
  }

  /** Arguments checked before anything is held or performed. */
  validate(name: string, args: unknown): { ok: true; args: unknown } | { ok: false; output: ToolOutput } {
    const found = this.byName.get(name);
    if (!found) return { ok: false, output: { text: `Unknown tool "${name}". Available: ${[...this.byName.keys()].join(", ") || "none"}`, isError: true } };
    const parsed = found.tool.parameters.safeParse(args);
    if (!parsed.success) return { ok: false, output: { text: `Invalid arguments for ${name}: ${z.prettifyError(parsed.error)}`, isError: true } };
    return { ok: true, args: parsed.data };
  }

  /**
   * Performs a call under the mount's policy as it is now. `approved` says a
   * person signed it (a hold); `replay` that an earlier attempt of this very
   * call may have run: a read replays freely, an idempotent write replays with
   * its key, anything else is answered unknown.
   */
  async call(name: string, args: unknown, scope: CallScope, opts: { replay?: boolean; approved?: boolean } = {}): Promise<GatewayResult> {
    const checked = this.validate(name, args);
    if (!checked.ok) return { ...checked.output, disposition: "invalid" };
    const { mount, tool, config } = this.byName.get(name)!;
    const policy = this.policy(name);
    if (policy === "deny") return { text: this.refusal(name), isError: true, disposition: "refused" };
    if (policy === "approval" && !opts.approved) return { text: `${name} needs a person's approval and was not performed.`, isError: true, disposition: "refused" };
    if (opts.replay && tool.sideEffects === "write" && tool.idempotency === "never") {
      return {
        text: `The outcome of ${name} is unknown: it was started but the runtime restarted before it answered, and it is not safe to repeat. Check before trying again.`,
        isError: true,
        disposition: "unknown",
      };
    }
    let secret: string | undefined;
    if (mount.secret_ref) {
      secret = this.deps.secret(mount.secret_ref);
      if (!secret) return { text: `${name} is not configured: the secret ${mount.secret_ref} of mount "${mount.alias}" is not set.`, isError: true, disposition: "refused" };
    }
    let output: ToolOutput;
    try {
      const tools = tool.callsTools ? this.deps.caller?.(scope) : undefined;
      output = await tool.call(checked.args, { ...scope, config, secret, session: this.deps.session(mount.alias), tools });
    } catch (err) {
      output = { text: `${name} failed: ${err instanceof Error ? err.message : String(err)}`, isError: true };
    }
    const text = this.redactor.redact(output.text);
    const clipped = text.length > MAX_RESULT_CHARS ? `${text.slice(0, MAX_RESULT_CHARS)}\n[result clipped at ${MAX_RESULT_CHARS} characters]` : text;
    return { text: clipped, isError: output.isError, disposition: "performed" };
  }

  /** What a call refused by a `deny` policy is answered. */
  refusal(name: string): string {
    return `Refused: the policy of mount "${this.byName.get(name)?.mount.alias}" does not allow ${name}.`;
  }

  redact(text: string): string {
    return this.redactor.redact(text);
  }
}

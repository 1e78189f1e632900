// The gateway: the only way a model's tool call reaches the outside. It maps
// `<alias>__<tool>` to a mounted plugin, applies the mount's policy, resolves
// the mount's secret at call time, redacts secrets from what comes back, and
// applies the replay rule of invariant 8. For a plugin that discovers its
// tools, it also fetches the mount's tool list and keeps it with the mount.
import * as z from "zod";
import { evaluatePolicy, mountPolicy, type MountUnderPolicy, type PolicyDecision } from "./policy.ts";
import { nearest } from "../lib/nearest.ts";
import type { Audience, CallableTool, HeldSpan, Idempotency, Plugin, PluginTool, SessionState, SideEffects, ToolCaller, ToolDiscovery, ToolOutput } from "./contract.ts";
import { Redactor } from "./redact.ts";
import { ToolList } from "./tool-lists.ts";
import { nameTools, SEPARATOR } from "./tool-names.ts";

/** A secret's name: the same for a tenant's own and a Worker secret. */
export const SECRET_NAME = /^[A-Z][A-Z0-9_]{0,63}$/;

export const mountSchema = z.object({
  alias: z.string().regex(/^[a-z][a-z0-9_]{0,30}$/, "alias: lower-case letters, digits and _ (max 31)"),
  plugin: z.string(),
  config: z.record(z.string(), z.unknown()).default({}),
  /**
   * The NAME of a secret, resolved only when a call is made: the tenant's own
   * (set by value through /v1), or a Worker secret where the platform set the
   * mount (`set_by`) or granted the name to the tenant (SECRET_GRANTS).
   */
  secret_ref: z.string().regex(SECRET_NAME, "secret_ref names a secret (UPPER_SNAKE_CASE, at most 64 characters), never its value").optional(),
  policy: mountPolicy.optional(),
  /** Stamped by the runtime when the platform set the mount (MOUNTS, or ADMIN_TOKEN); a tenant's never carries it. */
  set_by: z.literal("platform").optional(),
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
  audience: Audience;
}

/** A mount's standing document as a conversation of one audience sees it now. */
export interface Standing {
  alias: string;
  lines: string[];
  render(lines: string[]): string;
}

/** A mount that cannot be used as configured (unknown plugin, bad config). */
export class MountError extends Error {
  override name = "MountError";
}

/** How a call ended, for callers that must tell "refused" or "unknown" from "performed". */
export type Disposition = "performed" | "refused" | "unknown" | "invalid";
export type GatewayResult = ToolOutput & { disposition: Disposition };

/** A mount's secret as its caller resolved it: the value, or a sentence saying why there is none. */
export type SecretLookup = { value: string } | { missing: string };

export interface GatewayDeps {
  secret(mount: Mount): SecretLookup;
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

/** A mount whose tools are discovered, with its list as it is kept. */
interface Discovered {
  mount: Mount;
  discovery: ToolDiscovery;
  config: Record<string, unknown>;
  list: ToolList;
}

/** What one call may put in the transcript (and so in SQLite and the next model request). */
const MAX_RESULT_CHARS = 64_000;

/**
 * A tool's parameters as JSON Schema, made once per tool (the tool list is
 * built for every model request). As input: what a caller may send, so a field
 * with a default is optional.
 */
const schemas = new WeakMap<PluginTool, Record<string, unknown>>();
function parametersOf(tool: PluginTool): Record<string, unknown> {
  // A discovered tool brings the JSON Schema its server declared.
  if (tool.inputSchema) return tool.inputSchema;
  let schema = schemas.get(tool);
  if (!schema) schemas.set(tool, (schema = z.toJSONSchema(tool.parameters, { io: "input" }) as Record<string, unknown>));
  return schema;
}

export class Gateway {
  private readonly byName = new Map<string, Resolved>();
  /** Each mount with its plugin and parsed config, in mount order. */
  private readonly resolvedMounts: Omit<Resolved, "tool">[] = [];
  private readonly redactor: Redactor;
  /** Mounts whose tools are discovered, by alias. */
  private readonly discovered = new Map<string, Discovered>();
  /** Tools renamed or left out, for `status`. */
  private readonly namingNotes: string[] = [];

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
      const config = parsed.data;
      this.resolvedMounts.push({ mount, plugin, config });
      let tools = plugin.tools;
      if (plugin.discovery) {
        const list = new ToolList(deps.session(mount.alias));
        this.discovered.set(mount.alias, { mount, discovery: plugin.discovery, config, list });
        tools = plugin.discovery.toolsOf(list.entries(), config);
      }
      const { named, notes } = nameTools(mount.alias, tools);
      this.namingNotes.push(...notes);
      for (const { name, tool } of named) {
        // Only where an alias itself holds "__" can two mounts give one name; the earlier mount keeps it.
        if (this.byName.has(name)) this.namingNotes.push(`"${tool.name}" of mount "${mount.alias}" is left out: mount "${this.byName.get(name)!.mount.alias}" has a tool named ${name}.`);
        else this.byName.set(name, { mount, plugin, tool, config });
      }
    }
    const secrets = mounts.flatMap((m) => (m.secret_ref ? [deps.secret(m)] : [])).flatMap((found) => ("value" in found ? [found.value] : []));
    this.redactor = new Redactor(secrets);
  }

  /**
   * What the model sees: one tool per mounted plugin tool, named
   * `<alias>__<tool>`, except those it may not call (denied, or unavailable):
   * offering them would only invite a refusal.
   */
  tools(): ModelTool[] {
    const callable = this.callable();
    return this.offered().map(([name, { mount, tool, config }]) => ({
      name,
      description: `${tool.callsTools ? tool.callsTools(callable, config) : tool.description} (mount "${mount.alias}")`,
      parameters: parametersOf(tool),
    }));
  }

  /** Every mounted tool, offered or not, with its policy as it is now: what an operator is shown. */
  toolPolicies(): { name: string; policy: PolicyDecision }[] {
    return [...this.byName.keys()].map((name) => ({ name, policy: this.policy(name)! }));
  }

  /** The tools the model is offered, by gateway name. */
  private offered(): [string, Resolved][] {
    return [...this.byName].filter(([name]) => this.policy(name) !== "deny");
  }

  /** The standing documents of the mounts whose plugin keeps one (memory), for this audience. */
  standing(audience: Audience): Standing[] {
    const out: Standing[] = [];
    for (const { mount, plugin, config } of this.resolvedMounts) {
      const standing = plugin.standing;
      if (!standing) continue;
      const ctx = { alias: mount.alias, config, audience };
      out.push({ alias: mount.alias, lines: standing.lines({ ...ctx, session: this.deps.session(mount.alias) }), render: (shown) => standing.render(shown, ctx) });
    }
    return out;
  }

  /** The tools a tool that calls tools may call: every one not denied, except those that call tools themselves. */
  callable(): CallableTool[] {
    return [...this.byName].flatMap(([name, { mount, tool }]) => {
      const policy = this.policy(name);
      if (tool.callsTools || policy === "deny") return [];
      // The name after `<alias>__` is the one the gateway knows the tool by (a discovered tool may have been renamed).
      return [{ alias: mount.alias, tool: name.slice(mount.alias.length + SEPARATOR.length), description: tool.description, parameters: parametersOf(tool), sideEffects: tool.sideEffects, policy: policy! }];
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

  /**
   * For a tool of a plugin that holds something per conversation on a lease
   * (a machine): its mount, and whether the call ends the lease or postpones it.
   */
  leaseOf(name: string): { mount: Mount; ends: boolean; postpones: boolean } | undefined {
    const found = this.byName.get(name);
    const lease = found?.plugin.lease;
    return lease && { mount: found.mount, ends: lease.ends.includes(found.tool.name), postpones: lease.postpone === found.tool.name };
  }

  /** Whether any mount's plugin holds something on a lease (a machine). */
  holdsLeases(): boolean {
    return this.resolvedMounts.some((r) => r.plugin.lease !== undefined);
  }

  /** Ends what a leased mount's calls left running in a conversation: what was held, for how long (none when the mount's plugin holds nothing). */
  async retire(alias: string, scope: { tenant: string; agent: string; conversation: string }): Promise<HeldSpan[]> {
    const resolved = this.resolvedMounts.find((r) => r.mount.alias === alias);
    if (!resolved?.plugin.lease) return [];
    return resolved.plugin.lease.retire({ ...scope, alias, config: resolved.config });
  }

  /** The mount under an alias, as configured now. */
  mounted(alias: string): Mount | undefined {
    return this.mounts.find((m) => m.alias === alias);
  }

  // ---- discovered tool lists ----------------------------------------------

  /** The mounts whose tool list should be fetched by `now`. */
  toolListsDue(now: number): Mount[] {
    return [...this.discovered.values()].filter((d) => d.list.dueAt(d.discovery.ttlMs(d.config)) <= now).map((d) => d.mount);
  }

  /** A mount's first tool list is still being fetched: a model asked now would not see its tools. */
  awaitingToolLists(): boolean {
    return [...this.discovered.values()].some((d) => d.list.firstPending());
  }

  /**
   * Fetches a mount's tool list (off the object: it waits on the network) and
   * keeps it, redacted, with the mount; a failure is kept too, for `status`
   * and the next try.
   */
  async fetchTools(alias: string, scope: { tenant: string; agent: string }): Promise<void> {
    const found = this.discovered.get(alias);
    if (!found) return;
    const { mount, discovery, config, list } = found;
    const lookup = mount.secret_ref ? this.deps.secret(mount) : undefined;
    if (lookup && "missing" in lookup) return list.failed(lookup.missing, Date.now());
    const secret = lookup?.value;
    try {
      const fetched = await discovery.fetch({ ...scope, config, secret, session: this.deps.session(alias) });
      list.fetched(this.redactor.redactJson(fetched), Date.now());
    } catch (err) {
      list.failed(this.redactor.redact(err instanceof Error ? err.message : String(err)), Date.now());
    }
  }

  /** Sentences for `status`: each discovered list's state, and every tool renamed or left out. */
  toolNotes(): string[] {
    const offered = (alias: string) => this.offered().filter(([, r]) => r.mount.alias === alias).length;
    return [...[...this.discovered].flatMap(([alias, d]) => d.list.describe(alias, offered(alias))), ...this.namingNotes];
  }

  /** The mount's policy for this tool as it is now (a tool that cannot be called is denied); undefined for an unknown tool. */
  policy(name: string): PolicyDecision | undefined {
    const found = this.byName.get(name);
    if (!found) return undefined;
    const { mount, plugin, tool } = found;
    if (tool.unavailable !== undefined) return "deny";
    return evaluatePolicy(mount.policy, { name: tool.name, sideEffects: tool.sideEffects, pluginDefault: defaultPolicyOf(plugin, tool) });
  }

  mountsUnderPolicy(): MountUnderPolicy[] {
    return this.mounts.map((mount) => {
      const tools = [...this.byName.values()].filter((r) => r.mount === mount);
      return {
        alias: mount.alias,
        plugin: mount.plugin,
        policy: mount.policy,
        tools: tools.map(({ plugin, tool }) => ({ name: tool.name, sideEffects: tool.sideEffects, pluginDefault: defaultPolicyOf(plugin, tool) })),
      };
    });
  }

  /** Arguments checked before anything is held or performed. */
  validate(name: string, args: unknown): { ok: true; args: unknown } | { ok: false; output: ToolOutput } {
    const found = this.byName.get(name);
    if (!found) return { ok: false, output: { text: `Unknown tool "${name}". Available: ${this.offered().map(([offered]) => offered).join(", ") || "none"}`, isError: true } };
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
    const found = mount.secret_ref ? this.deps.secret(mount) : undefined;
    if (found && "missing" in found) return { text: `${name} is not configured: ${found.missing}.`, isError: true, disposition: "refused" };
    const secret = found?.value;
    let output: ToolOutput;
    try {
      const toolsChanged = () => this.discovered.get(mount.alias)?.list.changed();
      const tools = tool.callsTools ? this.deps.caller?.(scope) : undefined;
      output = await tool.call(checked.args, { ...scope, alias: mount.alias, config, secret, session: this.deps.session(mount.alias), toolsChanged, tools });
    } catch (err) {
      output = { text: `${name} failed: ${err instanceof Error ? err.message : String(err)}`, isError: true };
    }
    const text = this.redactor.redact(output.text);
    const clipped = text.length > MAX_RESULT_CHARS ? `${text.slice(0, MAX_RESULT_CHARS)}\n[result clipped at ${MAX_RESULT_CHARS} characters]` : text;
    return { text: clipped, isError: output.isError, ...(output.images?.length ? { images: output.images } : {}), ...(output.metered?.length ? { metered: output.metered } : {}), disposition: "performed" };
  }

  /** What a call refused by a `deny` policy is answered. */
  refusal(name: string): string {
    const found = this.byName.get(name);
    if (found?.tool.unavailable !== undefined) return `Refused: ${name} ${found.tool.unavailable}.`;
    return `Refused: the policy of mount "${found?.mount.alias}" does not allow ${name}.`;
  }

  redact(text: string): string {
    return this.redactor.redact(text);
  }
}

function defaultPolicyOf(plugin: Plugin, tool: PluginTool): "approval" | undefined {
  return tool.defaultPolicy ?? plugin.defaultPolicy?.[tool.name];
}

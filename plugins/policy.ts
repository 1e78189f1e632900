// Mount policy: which calls run, which are refused, which wait for a person.
import * as z from "zod";

export const policyDecision = z.enum(["allow", "deny", "approval"]);
export type PolicyDecision = z.infer<typeof policyDecision>;

export const mountPolicy = z.object({
  read: policyDecision.optional(),
  write: policyDecision.optional(),
  tools: z.record(z.string(), policyDecision).optional(),
});
export type MountPolicy = z.infer<typeof mountPolicy>;

export interface ToolUnderPolicy {
  name: string;
  sideEffects: "read" | "write";
  /** The plugin's own default: tools a person must sign even on an open mount. */
  pluginDefault?: "approval";
}

/**
 * A mount's per-tool entry decides; otherwise its read/write entry, then
 * allow. A plugin's `defaultPolicy` holds a tool for approval unless the
 * mount's own per-tool entry lifts it: a mount-wide `write: "allow"` does not.
 */
export function evaluatePolicy(policy: MountPolicy | undefined, tool: ToolUnderPolicy): PolicyDecision {
  const own = policy?.tools?.[tool.name];
  if (own) return own;
  const base = (tool.sideEffects === "read" ? policy?.read : policy?.write) ?? "allow";
  if (base === "allow" && tool.pluginDefault === "approval") return "approval";
  return base;
}

export interface MountUnderPolicy {
  alias: string;
  plugin: string;
  policy?: MountPolicy;
  tools: ToolUnderPolicy[];
}

/** Warns where one mount of a plugin lets a tool run freely that another mount of it gates. */
export function policyWarnings(mounts: MountUnderPolicy[]): string[] {
  const warnings: string[] = [];
  for (const gated of mounts) {
    for (const tool of gated.tools) {
      if (evaluatePolicy(gated.policy, tool) === "allow") continue;
      for (const open of mounts) {
        if (open === gated || open.plugin !== gated.plugin) continue;
        const t = open.tools.find((x) => x.name === tool.name);
        if (t && evaluatePolicy(open.policy, t) === "allow") {
          warnings.push(
            `mount "${open.alias}" lets ${open.plugin}.${tool.name} run without a person, while mount "${gated.alias}" of the same plugin gates it`,
          );
        }
      }
    }
  }
  return warnings;
}

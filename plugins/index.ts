// The plugins folder's public interface.
import { clockPlugin } from "./clock.ts";
import { httpPlugin } from "./http.ts";
import { jsPlugin } from "./js.ts";
import { memoryPlugin } from "./memory.ts";
import type { Plugin } from "./contract.ts";

export type { Plugin, PluginTool, ToolContext, ToolOutput, SideEffects, Idempotency, SessionState } from "./contract.ts";
export { Gateway, MountError, mountSchema, type ModelTool, type Mount, type CallScope, type GatewayDeps, type GatewayResult, type Disposition } from "./gateway.ts";

const registry: Plugin[] = [clockPlugin, httpPlugin, jsPlugin, memoryPlugin];

/** Every plugin a mount may name. */
export function plugins(): readonly Plugin[] {
  return registry;
}

/** Adds a plugin at start-up (the Worker entry, or a test entry with a test-only plugin). */
export function registerPlugin(plugin: Plugin): void {
  if (registry.some((p) => p.name === plugin.name)) throw new Error(`plugin "${plugin.name}" is already registered`);
  registry.push(plugin);
}

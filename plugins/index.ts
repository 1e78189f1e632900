// The plugins folder's public interface.
import { clockPlugin } from "./clock.ts";
import { httpPlugin } from "./http.ts";
import { journalPlugin } from "./journal.ts";
import { jsPlugin } from "./js/index.ts";
import { machinePlugin } from "./machine.ts";
import { mcpPlugin } from "./mcp.ts";
import { memoryPlugin } from "./memory.ts";
import { todoPlugin } from "./todo.ts";
import type { Plugin } from "./contract.ts";

export type { Audience, Plugin, PluginTool, ToolContext, ToolOutput, SideEffects, Idempotency, SessionState, StandingContext, StandingDocument, MountContext, ToolDiscovery, FetchedTools, ToolCaller, CallableTool, PluginLease, LeaseContext, HeldSpan } from "./contract.ts";
export { ToolList } from "./tool-lists.ts";
export { evaluatePolicy, mountPolicy, policyDecision, policyWarnings, type MountPolicy, type PolicyDecision, type MountUnderPolicy, type ToolUnderPolicy } from "./policy.ts";
export { Gateway, MountError, mountSchema, SECRET_NAME, type ModelTool, type Mount, type CallScope, type Standing, type GatewayDeps, type GatewayResult, type Disposition, type SecretLookup } from "./gateway.ts";

/** The plugins this project ships; the Worker entry hands them (and any of its own) to the runtime. */
export const builtinPlugins: readonly Plugin[] = [clockPlugin, httpPlugin, jsPlugin, machinePlugin, mcpPlugin, memoryPlugin, todoPlugin, journalPlugin];

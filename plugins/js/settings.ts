// The js plugin's mount config and the limits around it.
import * as z from "zod";

export const MAX_CPU_MS = 10_000;
// Within the tool lane's run lease (90 s), with room for the report.
export const MAX_WALL_MS = 60_000;
export const MAX_MEMORY_MIB = 64;
export const MAX_TOOL_CALLS = 100;

// Strict: a key it does not know (timeoutMs, before cpuMs and wallMs) is reported, not ignored.
export const configSchema = z.strictObject({
  /** Computation, tool calls not included. */
  cpuMs: z.number().int().min(50).max(MAX_CPU_MS).default(2_000),
  /** Start to answer, tool calls included. */
  wallMs: z.number().int().min(100).max(MAX_WALL_MS).default(30_000),
  memoryMiB: z.number().int().min(4).max(MAX_MEMORY_MIB).default(16),
  maxToolCalls: z.number().int().min(0).max(MAX_TOOL_CALLS).default(20),
});
export type JsConfig = z.infer<typeof configSchema>;

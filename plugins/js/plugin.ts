// The js plugin (tier 2, the sandbox): runs model-written JavaScript in a fresh
// QuickJS instance per call (script-run.ts), which cannot hold the isolate
// (sandbox.ts). In code mode a script calls the agent's other mounted tools
// through `tools`, each call through the gateway under its mount's policy.
import * as z from "zod";
import type { CallableTool, Plugin } from "../contract.ts";
import { typeOf } from "../signature.ts";
import { runScript } from "./script-run.ts";
import { configSchema } from "./settings.ts";

const MAX_CODE = 100_000;

const BASE_DESCRIPTION =
  "Evaluate JavaScript (ES2023) in a fresh, isolated sandbox and return the value of the last expression (as JSON when possible) " +
  "plus anything printed with console.log. Use it for exact arithmetic, data transformation, parsing and checking logic. " +
  "The sandbox has no network, no filesystem, no timers, no modules and nothing kept between calls; " +
  "time and memory are limited. To use await, end with an async IIFE: (async () => { ... })().";

/** The description with the tools a script may call, in TypeScript-like form. */
function describeWithTools(callable: CallableTool[], config: Record<string, unknown>): string {
  if (callable.length === 0) return BASE_DESCRIPTION;
  const { maxToolCalls } = configSchema.parse(config);
  const signatures = callable.map((c) => {
    const note = c.policy === "approval" ? " Needs a person's approval: the call is held (not performed) and resolves with a notice saying so." : "";
    return `tools.${c.alias}.${c.tool}(args: ${typeOf(c.parameters)}): Promise<string> // ${c.sideEffects}. ${c.description}${note}`;
  });
  return (
    `${BASE_DESCRIPTION}\n\nCode mode: a script can call the agent's tools, at most ${maxToolCalls} per script, ` +
    "with `await tools.<alias>.<tool>(args)`, and run several at once with Promise.all. " +
    "Prefer one script that calls the tools it needs, filters and joins their results, and returns only what matters, over calling them one by one. " +
    "A call resolves with the tool's text result (JSON.parse it when it is JSON) and rejects with a ToolError when the tool fails, " +
    "is refused by policy or does not exist. Each call is under its mount's policy and recorded like a direct call. Tools:\n" +
    signatures.join("\n")
  );
}

export const jsPlugin: Plugin = {
  name: "js",
  description: "Runs JavaScript in an isolated sandbox (QuickJS) for exact computation, and scripts that call the agent's other tools.",
  config: configSchema,
  tools: [
    {
      name: "run",
      description: BASE_DESCRIPTION,
      parameters: z.object({ code: z.string().min(1).max(MAX_CODE).describe("JavaScript source; its last expression is the result") }),
      // The script's own tool calls are each under their mount's policy and replay rule:
      // re-running a script gets recorded answers back for the calls it already made.
      sideEffects: "read",
      idempotency: "idempotent",
      callsTools: describeWithTools,
      async call({ code }, { config, tools }) {
        return runScript(code, config, { caller: tools });
      },
    },
  ],
};

// The js plugin (tier 2, the sandbox): runs model-written JavaScript in a fresh
// QuickJS runtime per call. The sandbox has no network, no filesystem and no
// host objects: only a console.log whose lines are collected for the answer.
import { newQuickJSWASMModuleFromVariant, newVariant, Scope, type QuickJSContext, type QuickJSHandle, type QuickJSWASMModule } from "quickjs-emscripten-core";
import releaseSyncVariant from "@jitl/quickjs-wasmfile-release-sync";
import wasmModule from "@jitl/quickjs-wasmfile-release-sync/wasm";
import { z } from "zod";
import type { Plugin, ToolOutput } from "./contract.ts";

const MiB = 1 << 20;
const MAX_TIMEOUT_MS = 10_000;
const MAX_MEMORY_MIB = 64;
const MAX_OUTPUT = 20_000;
const MAX_LOG_LINES = 1_000;
const MAX_CODE = 100_000;
// Above about 512 KiB the host's own stack overflows before QuickJS notices deep recursion.
const MAX_STACK = 256 * 1024;
// Reporting (serialising the value, describing an error) gets its own small
// budget, so that a heap or clock the code used up can still be reported.
const REPORT_MS = 500;
const REPORT_HEADROOM = 4 * MiB;

const configSchema = z.object({
  timeoutMs: z.number().int().min(50).max(MAX_TIMEOUT_MS).default(2_000),
  memoryMiB: z.number().int().min(4).max(MAX_MEMORY_MIB).default(16),
});
type JsConfig = z.infer<typeof configSchema>;

// Runs inside the sandbox before the model's code: installs console.log and
// returns the helpers that print values and errors, holding the original
// JSON.stringify, String and Error so the model's code cannot change how it is reported.
const PRELUDE = `(emit) => {
  const stringify = JSON.stringify, str = String, ErrorClass = Error;
  const show = (v) => {
    try { const json = stringify(v); if (json !== undefined) return json; } catch {}
    try { return str(v); } catch { return "[a value that cannot be printed]"; }
  };
  const describe = (e) => e instanceof ErrorClass ? (e.name + ": " + e.message + "\\n" + (e.stack ?? "")).trimEnd() : show(e);
  globalThis.console = { log: (...args) => emit(args.map((a) => (typeof a === "string" ? a : show(a))).join(" ")) };
  return [show, describe];
}`;

let quickjs: Promise<QuickJSWASMModule> | undefined;

/** The QuickJS wasm module, instantiated once per isolate on first use. */
function loadQuickJS(): Promise<QuickJSWASMModule> {
  quickjs ??= newQuickJSWASMModuleFromVariant(newVariant(releaseSyncVariant, { wasmModule })).catch((err) => {
    quickjs = undefined;
    throw err;
  });
  return quickjs;
}

/** Evaluates `code` in a runtime of its own; every handle, the context and the runtime are disposed on the way out. */
function evaluate(QuickJS: QuickJSWASMModule, code: string, { timeoutMs, memoryMiB }: JsConfig): ToolOutput {
  return Scope.withScope((scope) => {
    const rt = scope.manage(QuickJS.newRuntime());
    rt.setMemoryLimit(memoryMiB * MiB);
    rt.setMaxStackSize(MAX_STACK);
    let deadline = Date.now() + timeoutMs;
    let timedOut = false;
    // QuickJS polls this between bytecode steps, so one long built-in call
    // (a huge Array.prototype.fill) finishes before the limit is seen.
    rt.setInterruptHandler(() => Date.now() > deadline && (timedOut = true));
    const vm = scope.manage(rt.newContext());

    const logs: string[] = [];
    let logChars = 0;
    let dropped = 0;
    const emit = scope.manage(
      vm.newFunction("emit", (line) => {
        const text = vm.getString(line);
        if (logs.length >= MAX_LOG_LINES || logChars >= MAX_OUTPUT) dropped++;
        else {
          logs.push(text.slice(0, MAX_OUTPUT));
          logChars += text.length + 1;
        }
      }),
    );
    const prelude = scope.manage(vm.unwrapResult(vm.evalCode(PRELUDE, "prelude.js")));
    const helpers = scope.manage(vm.unwrapResult(vm.callFunction(prelude, vm.undefined, emit)));
    const show = scope.manage(vm.getProp(helpers, 0));
    const describe = scope.manage(vm.getProp(helpers, 1));

    const outcome = settle(vm, scope, vm.evalCode(code, "run.js"));
    const ranOut = timedOut;
    deadline = Date.now() + REPORT_MS;
    rt.setMemoryLimit(memoryMiB * MiB + REPORT_HEADROOM);

    let text: string;
    let isError = false;
    if ("value" in outcome) text = `Result: ${printed(vm, scope, show, outcome.value) ?? "[the result could not be serialised within the limits]"}`;
    else if ("pending" in outcome) {
      isError = true;
      text = "The returned promise did not settle: the sandbox has no timers or I/O.";
    } else if (ranOut) {
      isError = true;
      text = `Time limit: the code was stopped after ${timeoutMs} ms.`;
    } else {
      isError = true;
      const described = printed(vm, scope, describe, outcome.error);
      if (described?.startsWith("InternalError: out of memory")) text = `Memory limit: the code used more than ${memoryMiB} MiB.`;
      else text = `Uncaught ${described ?? "exception (it could not be described)"}`;
    }
    if (logs.length > 0) text += `\nConsole output:\n${logs.join("\n")}`;
    if (dropped > 0) text += `\n[${dropped} more console lines not collected]`;
    if (text.length > MAX_OUTPUT) text = `${text.slice(0, MAX_OUTPUT)}\n[output truncated at ${MAX_OUTPUT} characters]`;
    return { text, isError };
  });
}

type Outcome = { value: QuickJSHandle } | { error: QuickJSHandle } | { pending: true };

/** Runs the jobs the code queued (promise callbacks) and, if it returned a promise, takes its outcome. */
function settle(vm: QuickJSContext, scope: Scope, evaluated: ReturnType<QuickJSContext["evalCode"]>): Outcome {
  if (evaluated.error) return { error: scope.manage(evaluated.error) };
  const value = scope.manage(evaluated.value);
  const jobs = vm.runtime.executePendingJobs();
  if (jobs.error) return { error: scope.manage(jobs.error) };
  const state = vm.getPromiseState(value);
  if (state.type === "pending") return { pending: true };
  if (state.type === "rejected") return { error: scope.manage(state.error) };
  return { value: state.notAPromise ? value : scope.manage(state.value) };
}

/** Calls a prelude helper on a value; undefined when the helper itself fails (a hostile getter, the report budget). */
function printed(vm: QuickJSContext, scope: Scope, helper: QuickJSHandle, value: QuickJSHandle): string | undefined {
  const result = vm.callFunction(helper, vm.undefined, value);
  if (result.error) {
    result.error.dispose();
    return undefined;
  }
  return vm.getString(scope.manage(result.value));
}

export const jsPlugin: Plugin = {
  name: "js",
  description: "Runs JavaScript in an isolated sandbox (QuickJS) for exact computation.",
  config: configSchema,
  tools: [
    {
      name: "run",
      description:
        "Evaluate JavaScript (ES2023) in a fresh, isolated sandbox and return the value of the last expression (as JSON when possible) " +
        "plus anything printed with console.log. Use it for exact arithmetic, data transformation, parsing and checking logic. " +
        "The sandbox has no network, no filesystem, no timers, no modules and nothing kept between calls; " +
        "time and memory are limited. To use await, end with an async IIFE: (async () => { ... })().",
      parameters: z.object({ code: z.string().min(1).max(MAX_CODE).describe("JavaScript source; its last expression is the result") }),
      sideEffects: "read",
      idempotency: "idempotent",
      async call({ code }, { config }) {
        const QuickJS = await loadQuickJS();
        try {
          return evaluate(QuickJS, code, config as JsConfig);
        } catch (err) {
          // A trap inside the wasm (not a JS exception) can leave the instance unusable: start afresh next call.
          quickjs = undefined;
          throw err;
        }
      },
    },
  ],
};

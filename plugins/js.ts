// The js plugin (tier 2, the sandbox): runs model-written JavaScript in a fresh
// QuickJS runtime per call. The sandbox has no network, no filesystem and no
// host objects but two: a console.log whose lines are collected for the
// answer, and (code mode) `tools`, through which a script calls the agent's
// other mounted tools. Each such call leaves through the gateway under its
// mount's policy and is recorded in the agent's journal, so a script re-run
// after a crash gets recorded answers back rather than acting twice.
//
// QuickJS runs synchronously: a script runs until it must wait for a tool's
// answer, the host awaits the answers (the sandbox is idle and uses no CPU
// meanwhile), hands them in as settled promises, and runs the script on.
import { newQuickJSWASMModuleFromVariant, newVariant, Scope, type QuickJSContext, type QuickJSDeferredPromise, type QuickJSHandle, type QuickJSRuntime, type QuickJSWASMModule } from "quickjs-emscripten-core";
import releaseSyncVariant from "@jitl/quickjs-wasmfile-release-sync";
import wasmModule from "@jitl/quickjs-wasmfile-release-sync/wasm";
import { z } from "zod";
import type { CallableTool, Plugin, ToolCaller, ToolOutput } from "./contract.ts";
import { typeOf } from "./signature.ts";

const MiB = 1 << 20;
const MAX_CPU_MS = 10_000;
// Within the tool lane's run lease (90 s), with room for the report.
const MAX_WALL_MS = 60_000;
const MAX_MEMORY_MIB = 64;
const MAX_TOOL_CALLS = 100;
const MAX_OUTPUT = 20_000;
const MAX_LOG_LINES = 1_000;
const MAX_CODE = 100_000;
const MAX_ARGS_CHARS = 100_000;
// Above about 512 KiB the host's own stack overflows before QuickJS notices deep recursion.
const MAX_STACK = 256 * 1024;
// Reporting (serialising the value, describing an error) gets its own small
// budget, so that a heap or clock the code used up can still be reported.
const REPORT_MS = 500;
const REPORT_HEADROOM = 4 * MiB;
/**
 * QuickJS asks the interrupt handler about every 10,000 jumps and calls. A
 * deployed Worker's clock stands still while code computes (it moves only on
 * I/O), so the CPU limit is also a budget of these polls: about what a tight
 * loop makes per millisecond on a current server core (measured: 27 on this
 * project's 2-core test machine). Loops with heavier bodies poll less often
 * and get more time; the Worker's own CPU limit stays the last resort.
 */
const POLLS_PER_MS = 50;

// Strict: a key it does not know (timeoutMs, before cpuMs and wallMs) is reported, not ignored.
const configSchema = z.strictObject({
  /** Computation, tool calls not included. */
  cpuMs: z.number().int().min(50).max(MAX_CPU_MS).default(2_000),
  /** Start to answer, tool calls included. */
  wallMs: z.number().int().min(100).max(MAX_WALL_MS).default(30_000),
  memoryMiB: z.number().int().min(4).max(MAX_MEMORY_MIB).default(16),
  maxToolCalls: z.number().int().min(0).max(MAX_TOOL_CALLS).default(20),
});
type JsConfig = z.infer<typeof configSchema>;

// Runs inside the sandbox before the model's code: installs console.log and
// `tools`, and returns the helpers that print values and errors, holding the
// original JSON.stringify, String and Error so the model's code cannot change
// how it is reported. `call` itself stays out of the script's reach.
const PRELUDE = `(emit, call) => {
  const stringify = JSON.stringify, str = String, ErrorClass = Error, ProxyClass = Proxy;
  const show = (v) => {
    try { const json = stringify(v); if (json !== undefined) return json; } catch {}
    try { return str(v); } catch { return "[a value that cannot be printed]"; }
  };
  const describe = (e) => e instanceof ErrorClass ? (e.name + ": " + e.message + "\\n" + (e.stack ?? "")).trimEnd() : show(e);
  globalThis.console = { log: (...args) => emit(args.map((a) => (typeof a === "string" ? a : show(a))).join(" ")) };
  // "then" is never a tool: awaiting tools or tools.<alias> must not call one.
  const named = (make) => new ProxyClass({}, { get: (_, key) => (typeof key === "string" && key !== "then" ? make(key) : undefined) });
  globalThis.tools = named((alias) => named((tool) => (args) => {
    const json = stringify(args === undefined ? {} : args);
    return call(alias, tool, json === undefined ? "null" : json);
  }));
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

type Limit = "cpu" | "wall" | "memory";
type Outcome = { value: QuickJSHandle } | { error: QuickJSHandle } | { pending: true } | { limit: Limit } | { unreachable: string };

export interface ScriptOptions {
  /** How the script reaches other tools; without it, every call is refused. */
  caller?: ToolCaller;
  /** The clock the limits read (tests freeze it, as a deployed Worker does while code computes). */
  now?: () => number;
}

/**
 * One script in a runtime of its own. Every handle, pending promise, the
 * context and the runtime are disposed on the way out, whatever happened.
 */
class ScriptRun {
  private readonly scope = new Scope();
  private readonly rt: QuickJSRuntime;
  private readonly vm: QuickJSContext;
  private readonly now: () => number;
  private readonly logs: string[] = [];
  private logChars = 0;
  private dropped = 0;
  // CPU accounting: time and polls spent inside the sandbox, against the current budget.
  private cpuSpent = 0;
  private sliceStart = 0;
  private sliceDepth = 0;
  private polls = 0;
  private budgetMs: number;
  private wallDeadline: number;
  private limit: Limit | null = null;
  private calls = 0;
  /** Tool calls made and not yet answered: the script may wait for these. */
  private readonly inFlight = new Set<Promise<void>>();
  private readonly unsettled = new Set<QuickJSDeferredPromise>();
  private unreachable: string | null = null;
  private closed = false;

  constructor(
    QuickJS: QuickJSWASMModule,
    private readonly config: JsConfig,
    private readonly caller: ToolCaller | undefined,
    now: (() => number) | undefined,
  ) {
    this.now = now ?? Date.now;
    this.budgetMs = config.cpuMs;
    this.wallDeadline = this.now() + config.wallMs;
    this.rt = this.scope.manage(QuickJS.newRuntime());
    this.rt.setMemoryLimit(config.memoryMiB * MiB);
    this.rt.setMaxStackSize(MAX_STACK);
    // Called between bytecode steps, and by the regexp engine while it backtracks.
    this.rt.setInterruptHandler(() => {
      this.polls++;
      if (this.cpuSpent + (this.now() - this.sliceStart) > this.budgetMs || this.polls > this.budgetMs * POLLS_PER_MS) this.limit ??= "cpu";
      else if (this.now() > this.wallDeadline) this.limit ??= "wall";
      return this.limit !== null;
    });
    this.vm = this.scope.manage(this.rt.newContext());
  }

  async run(code: string): Promise<ToolOutput> {
    const { vm } = this;
    const emit = this.scope.manage(vm.newFunction("emit", (line) => this.log(vm.getString(line))));
    const call = this.scope.manage(vm.newFunction("call", (alias, tool, args) => this.callTool(vm.getString(alias), vm.getString(tool), vm.getString(args))));
    const prelude = this.scope.manage(vm.unwrapResult(this.slice(() => vm.evalCode(PRELUDE, "prelude.js"))));
    const helpers = this.scope.manage(vm.unwrapResult(this.slice(() => vm.callFunction(prelude, vm.undefined, emit, call))));
    const show = this.scope.manage(vm.getProp(helpers, 0));
    const describe = this.scope.manage(vm.getProp(helpers, 1));

    const outcome = await this.outcome(code);
    // The report's own small budget, and no wall limit: the script is over.
    this.cpuSpent = 0;
    this.polls = 0;
    this.budgetMs = REPORT_MS;
    this.wallDeadline = Infinity;
    this.limit = null;
    this.rt.setMemoryLimit(this.config.memoryMiB * MiB + REPORT_HEADROOM);
    return this.report(outcome, show, describe);
  }

  /** Runs the script, and its promise callbacks as tool answers arrive, until it has an outcome. */
  private async outcome(code: string): Promise<Outcome> {
    const evaluated = this.slice(() => this.vm.evalCode(code, "run.js"));
    if (evaluated.error) {
      const error = this.scope.manage(evaluated.error);
      return this.limit ? { limit: this.limit } : { error };
    }
    const value = this.scope.manage(evaluated.value);
    if (this.limit) return { limit: this.limit };
    for (;;) {
      const jobs = this.slice(() => this.rt.executePendingJobs());
      const jobError = jobs.error && this.scope.manage(jobs.error);
      // A limit met inside a promise callback may surface as a rejection the script caught: the limit decides.
      if (this.limit) return { limit: this.limit };
      if (jobError) return { error: jobError };
      if (this.unreachable) return { unreachable: this.unreachable };
      // The answer waits for every call the script started, awaited or not, so none runs on after it.
      if (this.inFlight.size === 0) return this.settled(value);
      if (!(await this.nextAnswer())) return { limit: "wall" };
    }
  }

  private settled(value: QuickJSHandle): Outcome {
    const state = this.vm.getPromiseState(value);
    if (state.type === "pending") return { pending: true };
    if (state.type === "rejected") return { error: this.scope.manage(state.error) };
    return { value: state.notAPromise ? value : this.scope.manage(state.value) };
  }

  /** Waits for one more tool answer; false when the wall limit comes first. */
  private async nextAnswer(): Promise<boolean> {
    let timer: ReturnType<typeof setTimeout> | undefined;
    const late = new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), Math.max(0, this.wallDeadline - this.now()))));
    try {
      return await Promise.race<boolean>([...[...this.inFlight].map((p) => p.then(() => true)), late]);
    } finally {
      clearTimeout(timer);
    }
  }

  /** Code running inside the sandbox: its time counts against the CPU budget (once, however nested). */
  private slice<T>(work: () => T): T {
    if (this.sliceDepth++ === 0) this.sliceStart = this.now();
    try {
      return work();
    } finally {
      if (--this.sliceDepth === 0) this.cpuSpent += this.now() - this.sliceStart;
    }
  }

  private log(text: string): void {
    if (this.logs.length >= MAX_LOG_LINES || this.logChars >= MAX_OUTPUT) this.dropped++;
    else {
      this.logs.push(text.slice(0, MAX_OUTPUT));
      this.logChars += text.length + 1;
    }
  }

  /** `tools.<alias>.<tool>(args)`: a promise the host settles with the gateway's answer. */
  private callTool(alias: string, tool: string, argsJson: string): QuickJSHandle {
    const deferred = this.vm.newPromise();
    this.unsettled.add(deferred);
    const refuse = (text: string) => this.answer(deferred, { text, isError: true });
    if (!this.caller) refuse("Tools cannot be called from this sandbox.");
    else if (this.calls >= this.config.maxToolCalls) refuse(`Tool call limit: a script may make at most ${this.config.maxToolCalls} tool calls.`);
    else if (argsJson.length > MAX_ARGS_CHARS) refuse(`The arguments of ${alias}.${tool} are longer than ${MAX_ARGS_CHARS} characters.`);
    else {
      this.calls++;
      // Called at once, in the order the script makes its calls: the runtime numbers them so.
      const answered: Promise<void> = this.caller.call(alias, tool, JSON.parse(argsJson)).then(
        (output) => this.answer(deferred, output),
        (err) => {
          this.unreachable ??= err instanceof Error ? err.message : String(err);
        },
      );
      const tracked = answered.finally(() => this.inFlight.delete(tracked));
      this.inFlight.add(tracked);
    }
    return deferred.handle;
  }

  /**
   * Hands an answer in: a result resolves the call's promise, an error rejects
   * it with a ToolError. Settling frees the promise's resolvers; its handle was
   * the host function's return value, which QuickJS owns.
   */
  private answer(deferred: QuickJSDeferredPromise, output: ToolOutput): void {
    if (this.closed) return; // the run has ended: its runtime is gone
    const { vm } = this;
    try {
      this.slice(() => {
        const value = output.isError ? vm.newError({ name: "ToolError", message: output.text }) : vm.newString(output.text);
        try {
          if (output.isError) deferred.reject(value);
          else deferred.resolve(value);
        } finally {
          value.dispose();
        }
      });
      this.unsettled.delete(deferred);
    } catch {
      // The heap is full: the script cannot take the answer (the promise is freed with the run).
      this.limit ??= "memory";
    }
  }

  private report(outcome: Outcome, show: QuickJSHandle, describe: QuickJSHandle): ToolOutput {
    let text: string;
    let isError = true;
    if ("value" in outcome) {
      isError = false;
      text = `Result: ${this.printed(show, outcome.value) ?? "[the result could not be serialised within the limits]"}`;
    } else if ("pending" in outcome) text = "The returned promise did not settle: the sandbox has no timers, and no tool call was still running.";
    else if ("limit" in outcome) text = this.limitText(outcome.limit);
    else if ("unreachable" in outcome) text = `Stopped: a tool call could not reach the agent (${outcome.unreachable}).`;
    else {
      const described = this.printed(describe, outcome.error);
      text = described?.startsWith("InternalError: out of memory") ? this.limitText("memory") : `Uncaught ${described ?? "exception (it could not be described)"}`;
    }
    if (this.logs.length > 0) text += `\nConsole output:\n${this.logs.join("\n")}`;
    if (this.dropped > 0) text += `\n[${this.dropped} more console lines not collected]`;
    if (text.length > MAX_OUTPUT) text = `${text.slice(0, MAX_OUTPUT)}\n[output truncated at ${MAX_OUTPUT} characters]`;
    return { text, isError };
  }

  private limitText(limit: Limit): string {
    const { cpuMs, wallMs, memoryMiB } = this.config;
    switch (limit) {
      case "cpu":
        return `CPU time limit: the code was stopped after ${cpuMs} ms of computation.`;
      case "wall":
        return `Wall time limit: the script was stopped after ${wallMs} ms, tool calls included (${this.calls} calls made, ${this.inFlight.size} unanswered).`;
      case "memory":
        return `Memory limit: the code used more than ${memoryMiB} MiB.`;
    }
  }

  /** Calls a prelude helper on a value; undefined when the helper itself fails (a hostile getter, the report budget). */
  private printed(helper: QuickJSHandle, value: QuickJSHandle): string | undefined {
    const result = this.slice(() => this.vm.callFunction(helper, this.vm.undefined, value));
    if (result.error) {
      result.error.dispose();
      return undefined;
    }
    return this.vm.getString(this.scope.manage(result.value));
  }

  /** Frees everything; calls still out are answered into nothing. */
  dispose(): void {
    this.closed = true;
    for (const deferred of this.unsettled) deferred.dispose();
    this.scope.dispose();
  }
}

/** Evaluates `code` in a runtime of its own. Exported for the tests, which give it their own caller and clock. */
export async function runScript(code: string, config: Record<string, unknown>, options: ScriptOptions = {}): Promise<ToolOutput> {
  const QuickJS = await loadQuickJS();
  const run = new ScriptRun(QuickJS, configSchema.parse(config), options.caller, options.now);
  try {
    return await run.run(code);
  } catch (err) {
    // A trap inside the wasm (not a JS exception) can leave the instance unusable: start afresh next call.
    quickjs = undefined;
    throw err;
  } finally {
    run.dispose();
  }
}

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

// One script, in a sandbox of its own (sandbox.ts): no network, no files, only
// a console.log and (code mode) `tools`, whose calls leave through the gateway
// and are journaled, so a script re-run after a crash gets recorded answers
// back rather than acting twice (docs/design.md, "Scripts").
import { Scope, type QuickJSDeferredPromise, type QuickJSHandle } from "quickjs-emscripten-core";
import type { ToolCaller, ToolOutput } from "../contract.ts";
import { LimitReached, Sandbox, type Evaluated, type TimeLimit } from "./sandbox.ts";
import { configSchema, type JsConfig } from "./settings.ts";

const MiB = 1 << 20;
const MAX_OUTPUT = 20_000;
const MAX_LOG_LINES = 1_000;
const MAX_ARGS_CHARS = 100_000;
// QuickJS's own stack limit, which the script can catch ("InternalError: stack
// overflow"). The wasm's native frames live on the host's stack (JSPI's, for a
// sliced call), which a recursion with large frames can still overflow first
// (a deeply nested JSON.parse): that stops the script ("stack" below). At 256
// KiB an ordinary recursion already overflowed the host's stack once the wasm
// was optimised; at 128 KiB a plain recursion goes about 740 calls deep.
const MAX_STACK = 128 * 1024;
const HOST_STACK_OVERFLOW = "Maximum call stack size exceeded";
// Reporting (serialising the value, describing an error) gets its own small
// budget, so that a heap or clock the code used up can still be reported.
const REPORT_MS = 500;
const REPORT_HEADROOM = 4 * MiB;

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

type Limit = TimeLimit | "memory" | "stack";
type Outcome = { value: QuickJSHandle } | { error: QuickJSHandle } | { pending: true } | { limit: Limit } | { unreachable: string };

export interface ScriptOptions {
  /** How the script reaches other tools; without it, every call is refused. */
  caller?: ToolCaller;
}

/**
 * One script in a sandbox of its own. Every handle, pending promise, the
 * context and the runtime are disposed on the way out, whatever happened,
 * unless a limit stopped the sandbox mid-operation: then it is dropped whole.
 */
class ScriptRun {
  private readonly scope = new Scope();
  private readonly logs: string[] = [];
  private logChars = 0;
  private dropped = 0;
  private limit: Limit | null = null;
  private calls = 0;
  /** Tool calls made and not yet answered: the script may wait for these. */
  private readonly inFlight = new Set<Promise<void>>();
  /** Answers that came while the script ran: handed in before it runs on. */
  private readonly arrived: { deferred: QuickJSDeferredPromise; output: ToolOutput }[] = [];
  private readonly unsettled = new Set<QuickJSDeferredPromise>();
  private unreachable: string | null = null;

  constructor(
    private readonly sandbox: Sandbox,
    private readonly config: JsConfig,
    private readonly caller: ToolCaller | undefined,
  ) {
    sandbox.limit({ cpuMs: config.cpuMs, wallDeadline: Date.now() + config.wallMs });
  }

  async run(code: string): Promise<ToolOutput> {
    const { vm } = this.sandbox;
    // The host's own set-up runs unsliced: it is short and runs none of the model's code.
    const emit = this.scope.manage(vm.newFunction("emit", (line) => this.log(vm.getString(line))));
    const call = this.scope.manage(vm.newFunction("call", (alias, tool, args) => this.callTool(vm.getString(alias), vm.getString(tool), vm.getString(args))));
    const prelude = this.scope.manage(vm.unwrapResult(vm.evalCode(PRELUDE, "prelude.js")));
    const helpers = this.scope.manage(vm.unwrapResult(vm.callFunction(prelude, vm.undefined, emit, call)));
    const show = this.scope.manage(vm.getProp(helpers, 0));
    const describe = this.scope.manage(vm.getProp(helpers, 1));

    const outcome = await this.outcome(code);
    // The report's own small budget, and no wall limit: the script is over.
    this.sandbox.limit({ cpuMs: REPORT_MS, wallDeadline: Infinity });
    if (!this.sandbox.broken) this.sandbox.runtime.setMemoryLimit(this.config.memoryMiB * MiB + REPORT_HEADROOM);
    return this.report(outcome, show, describe);
  }

  /** Runs the script, and its promise callbacks as tool answers arrive, until it has an outcome. */
  private async outcome(code: string): Promise<Outcome> {
    const evaluated = await this.stoppable(() => this.sandbox.evalCode(code, "run.js"));
    if ("limit" in evaluated) return evaluated;
    if ("error" in evaluated) return { error: this.scope.manage(evaluated.error) };
    const value = this.scope.manage(evaluated.value);
    for (;;) {
      this.handInAnswers();
      // The heap could not take an answer: the memory limit decides, whatever the script would make of it.
      if (this.limit) return { limit: this.limit };
      const jobs = await this.stoppable(async () => ({ jobError: await this.sandbox.executePendingJobs() }));
      if ("limit" in jobs) return jobs;
      if (jobs.jobError) return { error: this.scope.manage(jobs.jobError) };
      if (this.unreachable) return { unreachable: this.unreachable };
      // The answer waits for every call the script started, awaited or not, so none runs on after it.
      if (this.inFlight.size === 0 && this.arrived.length === 0) return this.settled(value);
      if (this.arrived.length === 0 && !(await this.nextAnswer())) return { limit: "wall" };
    }
  }

  /** A sliced call, or the limit that stopped it (the sandbox is then unusable). */
  private async stoppable<T extends object>(work: () => Promise<T>): Promise<T | { limit: Limit }> {
    try {
      return await work();
    } catch (err) {
      if (err instanceof LimitReached) return { limit: err.limit };
      if (err instanceof RangeError && err.message === HOST_STACK_OVERFLOW) return { limit: "stack" };
      throw err;
    }
  }

  private settled(value: QuickJSHandle): Outcome {
    const { vm } = this.sandbox;
    const state = vm.getPromiseState(value);
    if (state.type === "pending") return { pending: true };
    if (state.type === "rejected") return { error: this.scope.manage(state.error) };
    return { value: state.notAPromise ? value : this.scope.manage(state.value) };
  }

  /** Waits for one more tool answer; false when the wall limit comes first. */
  private async nextAnswer(): Promise<boolean> {
    let timer: ReturnType<typeof setTimeout> | undefined;
    const late = new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), Math.max(0, this.sandbox.wallDeadline - Date.now()))));
    try {
      return await Promise.race<boolean>([...[...this.inFlight].map((p) => p.then(() => true)), late]);
    } finally {
      clearTimeout(timer);
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
    const deferred = this.sandbox.vm.newPromise();
    this.unsettled.add(deferred);
    const refuse = (text: string) => this.arrived.push({ deferred, output: { text, isError: true } });
    if (!this.caller) refuse("Tools cannot be called from this sandbox.");
    else if (this.calls >= this.config.maxToolCalls) refuse(`Tool call limit: a script may make at most ${this.config.maxToolCalls} tool calls.`);
    else if (argsJson.length > MAX_ARGS_CHARS) refuse(`The arguments of ${alias}.${tool} are longer than ${MAX_ARGS_CHARS} characters.`);
    else {
      this.calls++;
      // Called at once, in the order the script makes its calls: the runtime numbers them so.
      const answered: Promise<void> = this.caller.call(alias, tool, JSON.parse(argsJson)).then(
        (output) => void this.arrived.push({ deferred, output }),
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
   * Hands the answers in, between the script's slices (never into a suspended
   * one): a result resolves the call's promise, an error rejects it with a
   * ToolError. Settling frees the promise's resolvers; its handle was the host
   * function's return value, which QuickJS owns.
   */
  private handInAnswers(): void {
    const { vm } = this.sandbox;
    for (const { deferred, output } of this.arrived.splice(0)) {
      try {
        const value = output.isError ? vm.newError({ name: "ToolError", message: output.text }) : vm.newString(output.text);
        try {
          if (output.isError) deferred.reject(value);
          else deferred.resolve(value);
        } finally {
          value.dispose();
        }
        this.unsettled.delete(deferred);
      } catch {
        // The heap is full: the script cannot take the answer (the promise is freed with the run).
        this.limit ??= "memory";
      }
    }
  }

  private async report(outcome: Outcome, show: QuickJSHandle, describe: QuickJSHandle): Promise<ToolOutput> {
    let text: string;
    let isError = true;
    if ("value" in outcome) {
      isError = false;
      text = `Result: ${(await this.printed(show, outcome.value)) ?? "[the result could not be serialised within the limits]"}`;
    } else if ("pending" in outcome) text = "The returned promise did not settle: the sandbox has no timers, and no tool call was still running.";
    else if ("limit" in outcome) text = this.limitText(outcome.limit);
    else if ("unreachable" in outcome) text = `Stopped: a tool call could not reach the agent (${outcome.unreachable}).`;
    else {
      const described = await this.printed(describe, outcome.error);
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
      case "stack":
        return "Stack limit: the code nested calls or values too deeply and was stopped.";
    }
  }

  /** Calls a prelude helper on a value; undefined when the helper itself fails (a hostile getter, the report budget). */
  private async printed(helper: QuickJSHandle, value: QuickJSHandle): Promise<string | undefined> {
    const { vm } = this.sandbox;
    const result: Evaluated | { limit: Limit } = await this.stoppable(() => this.sandbox.callFunction(helper, vm.undefined, value));
    if ("limit" in result) return undefined;
    if ("error" in result) {
      result.error.dispose();
      return undefined;
    }
    return vm.getString(this.scope.manage(result.value));
  }

  /** Frees everything; calls still out are answered into nothing. */
  dispose(): void {
    if (this.sandbox.broken) return; // stopped mid-operation: nothing in it may be touched, it is dropped whole
    for (const deferred of this.unsettled) deferred.dispose();
    this.scope.dispose();
    this.sandbox.dispose();
  }
}

/** Evaluates `code` in a sandbox of its own. Exported for the tests, which give it their own caller. */
export async function runScript(code: string, config: Record<string, unknown>, options: ScriptOptions = {}): Promise<ToolOutput> {
  const parsed = configSchema.parse(config);
  const sandbox = await Sandbox.create(parsed.memoryMiB * MiB, MAX_STACK);
  const run = new ScriptRun(sandbox, parsed, options.caller);
  try {
    return await run.run(code);
  } finally {
    run.dispose();
  }
}

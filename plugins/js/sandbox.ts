// QuickJS that cannot hold the isolate: a sliced build in which every loop
// ticks, so a script yields to the isolate about every SLICE_MS and is stopped
// past its limit wherever it is (docs/design.md, "Scripts").
import { newQuickJSWASMModuleFromVariant, newVariant, type Lifetime, type QuickJSContext, type QuickJSHandle, type QuickJSRuntime } from "quickjs-emscripten-core";
import releaseSyncVariant from "@jitl/quickjs-wasmfile-release-sync";
import slicedWasm from "./quickjs-sliced.wasm";

/** Loop iterations between two ticks: a few hundred microseconds of interpretation, tens inside a BigInt. */
const FUEL = 10_000;
/** About how long the script holds the isolate before it lets others in. */
const SLICE_MS = 10;
/** Ticks in the first slice, before the rate is known; the count then follows the measured rate. */
const FIRST_SLICE_TICKS = 8;
const MAX_SLICE_TICKS = 100_000;

export type TimeLimit = "cpu" | "wall";

/** Thrown by a tick past a limit; the instance it stopped is unusable. */
export class LimitReached extends Error {
  constructor(readonly limit: TimeLimit) {
    super(`${limit} time limit reached`);
  }
}

export interface Budget {
  /** Computation, summed over the slices. */
  cpuMs: number;
  /** An absolute time (Date.now()). */
  wallDeadline: number;
}

/** JSPI, which workerd's V8 has and the TypeScript library does not describe yet. */
const jspi = WebAssembly as unknown as {
  Suspending: new (fn: () => Promise<number>) => WebAssembly.ImportValue;
  promising<A extends number[]>(fn: (...args: A) => number): (...args: A) => Promise<number>;
};

/**
 * What a sliced call needs of quickjs-emscripten-core that it keeps to itself
 * (a context's memory: the raw wasm exports, the FFI, the pointers), as
 * version 0.32.0, pinned in package.json, has it.
 */
interface ContextMemory {
  module: {
    _QTS_Eval(ctx: number, code: number, length: number, filename: number, detectModule: number, flags: number): number;
    _QTS_Call(ctx: number, fn: number, thisVal: number, argc: number, argv: number): number;
    _QTS_ExecutePendingJob(rt: number, maxJobs: number, lastJobContext: number): number;
    _malloc(bytes: number): number;
    _free(ptr: number): void;
    HEAPU8: Uint8Array;
  };
  ffi: {
    QTS_ResolveException(ctx: number, ptr: number): number;
    QTS_FreeValuePointer(ctx: number, ptr: number): void;
    QTS_FreeValuePointerRuntime(rt: number, ptr: number): void;
  };
  ctx: { value: number };
  rt: { value: number };
  heapValueHandle(ptr: number): QuickJSHandle;
  newHeapCharPointer(text: string): Lifetime<{ ptr: number; strlen: number }>;
  toPointerArray(handles: QuickJSHandle[]): Lifetime<number>;
}

type WasmFunction = (...args: number[]) => unknown;

function eachFunction<T extends object>(values: T, wrap: (fn: WasmFunction) => WasmFunction): T {
  return Object.fromEntries(Object.entries(values).map(([key, value]) => [key, typeof value === "function" ? wrap(value as WasmFunction) : value])) as T;
}

export type Evaluated = { value: QuickJSHandle } | { error: QuickJSHandle };

/**
 * When the script yields and when it is stopped. A tick inside a host
 * function's own call into the wasm (our `emit`, the FFI) is never a place to
 * suspend: JSPI can suspend only wasm frames.
 */
class Slicer {
  budget: Budget = { cpuMs: Infinity, wallDeadline: Infinity };
  cpuSpent = 0;
  /** Inside a sliced call, and not in a host function it called. */
  private slicing = false;
  private hostDepth = 0;
  private sliceStart = 0;
  private ticks = 0;
  private ticksPerSlice = FIRST_SLICE_TICKS;
  private computedUntil = 0;
  /** A sliced call is suspended mid-operation: the instance's heap and stack are the script's. */
  private paused = false;
  private readonly unguarded = new WeakMap<WasmFunction, WasmFunction>();

  /** An import of the wasm, counted while the host runs it. */
  host(fn: WasmFunction): WasmFunction {
    return (...args) => {
      this.hostDepth++;
      try {
        return fn(...args);
      } finally {
        this.hostDepth--;
      }
    };
  }

  /**
   * An export of the wasm, refused while a sliced call is suspended: QuickJS
   * may be inside malloc or mid-bytecode there, so anything the host has for
   * the script (a tool's answer) waits for the slice to end.
   */
  guard(fn: WasmFunction): WasmFunction {
    const guarded: WasmFunction = (...args) => {
      if (this.paused) throw new Error("the sandbox was called while its script is paused mid-operation");
      return fn(...args);
    };
    this.unguarded.set(guarded, fn);
    return guarded;
  }

  /** The export itself, for WebAssembly.promising (which takes only a wasm function). */
  raw(guarded: WasmFunction): WasmFunction {
    const fn = this.unguarded.get(guarded);
    if (!fn) throw new Error("not an export of this sandbox");
    return fn;
  }

  async sliced<T>(call: () => Promise<T>): Promise<T> {
    this.slicing = true;
    this.sliceStart = Date.now();
    this.ticks = 0;
    try {
      return await call();
    } finally {
      this.slicing = false;
      this.cpuSpent += Date.now() - this.sliceStart;
    }
  }

  /** Every FUEL loop iterations: the fuel for the next stretch, or -1 to pause here. */
  readonly tick = (): number => {
    if (!this.slicing || this.hostDepth > 0) return FUEL;
    this.ticks++;
    // Locally the clock moves while code computes; deployed it stands still until the next I/O (the pause).
    const now = Date.now();
    this.stopIfOver(now, now - this.sliceStart);
    if (this.ticks < this.ticksPerSlice && now - this.sliceStart < SLICE_MS) return FUEL;
    this.computedUntil = now;
    return -1;
  };

  /** The script's stack is suspended here while the isolate serves others; then it runs on, or is stopped. */
  readonly pause = async (): Promise<number> => {
    this.paused = true;
    try {
      await new Promise((resolve) => setTimeout(resolve, 0));
    } finally {
      this.paused = false;
    }
    const resumed = Date.now();
    // Where the clock stood still, the slice is measured to its resumption, the wait for the isolate included.
    const slice = this.computedUntil > this.sliceStart ? this.computedUntil - this.sliceStart : resumed - this.sliceStart;
    this.ticksPerSlice = Math.max(1, Math.min(MAX_SLICE_TICKS, this.ticks * 2, Math.floor((this.ticks * SLICE_MS) / Math.max(slice, 1))));
    this.cpuSpent += slice;
    this.sliceStart = resumed;
    this.ticks = 0;
    this.stopIfOver(resumed, 0);
    return FUEL;
  };

  private stopIfOver(now: number, inSlice: number): void {
    if (this.cpuSpent + inSlice > this.budget.cpuMs) throw new LimitReached("cpu");
    if (now > this.budget.wallDeadline) throw new LimitReached("wall");
  }
}

/** A QuickJS instance for one script: synchronous calls for the host's own work, sliced ones for the script's. */
export class Sandbox {
  /** Set when a call was stopped or trapped inside the wasm: nothing may touch the instance again. */
  broken = false;
  private readonly memory: ContextMemory;
  private readonly evalIn: (ctx: number, code: number, length: number, filename: number, detectModule: number, flags: number) => Promise<number>;
  private readonly callIn: (ctx: number, fn: number, thisVal: number, argc: number, argv: number) => Promise<number>;
  private readonly jobsIn: (rt: number, maxJobs: number, lastJobContext: number) => Promise<number>;

  private constructor(
    private readonly slicer: Slicer,
    readonly runtime: QuickJSRuntime,
    readonly vm: QuickJSContext,
  ) {
    this.memory = (vm as unknown as { memory: ContextMemory }).memory;
    const exports = this.memory.module;
    this.evalIn = jspi.promising(slicer.raw(exports._QTS_Eval) as typeof exports._QTS_Eval);
    this.callIn = jspi.promising(slicer.raw(exports._QTS_Call) as typeof exports._QTS_Call);
    this.jobsIn = jspi.promising(slicer.raw(exports._QTS_ExecutePendingJob) as typeof exports._QTS_ExecutePendingJob);
  }

  static async create(memoryLimitBytes: number, maxStackBytes: number): Promise<Sandbox> {
    const slicer = new Slicer();
    const variant = newVariant(releaseSyncVariant, {
      emscriptenModule: {
        instantiateWasm(imports, onSuccess) {
          const host = Object.fromEntries(Object.entries(imports).map(([name, fns]) => [name, eachFunction(fns, (fn) => slicer.host(fn))]));
          // Synchronous, so that a failure rejects the loader instead of leaving it waiting.
          const instance = new WebAssembly.Instance(slicedWasm, { ...host, antiproton: { tick: slicer.tick, pause: new jspi.Suspending(slicer.pause) } });
          // Emscripten reads only the exports.
          const exports = eachFunction(instance.exports, (fn) => slicer.guard(fn));
          onSuccess({ exports } as WebAssembly.Instance);
          return exports;
        },
      },
    });
    const runtime = (await newQuickJSWASMModuleFromVariant(variant)).newRuntime();
    runtime.setMemoryLimit(memoryLimitBytes);
    runtime.setMaxStackSize(maxStackBytes);
    return new Sandbox(slicer, runtime, runtime.newContext());
  }

  /** The limits the next sliced calls run under; the CPU count starts again. */
  limit(budget: Budget): void {
    this.slicer.budget = budget;
    this.slicer.cpuSpent = 0;
  }

  get wallDeadline(): number {
    return this.slicer.budget.wallDeadline;
  }

  async evalCode(code: string, filename: string): Promise<Evaluated> {
    const { memory } = this;
    const source = memory.newHeapCharPointer(code);
    // On the heap: a string on emscripten's stack would be popped while the call is suspended.
    const name = memory.newHeapCharPointer(filename);
    const result = await this.sliced(() => this.evalIn(memory.ctx.value, source.value.ptr, source.value.strlen, name.value.ptr, 0, 0));
    source.dispose();
    name.dispose();
    return this.resolved(result);
  }

  async callFunction(fn: QuickJSHandle, thisVal: QuickJSHandle, ...args: QuickJSHandle[]): Promise<Evaluated> {
    const argv = this.memory.toPointerArray(args);
    const result = await this.sliced(() => this.callIn(this.memory.ctx.value, fn.value, thisVal.value, args.length, argv.value));
    argv.dispose();
    return this.resolved(result);
  }

  /** Runs the promise callbacks due; the exception that stopped them, if any. */
  async executePendingJobs(): Promise<QuickJSHandle | undefined> {
    const { memory } = this;
    const out = memory.module._malloc(4);
    const valuePtr = await this.sliced(() => this.jobsIn(memory.rt.value, -1, out));
    const ctx = new DataView(memory.module.HEAPU8.buffer).getInt32(out, true);
    memory.module._free(out);
    if (ctx === 0) {
      memory.ffi.QTS_FreeValuePointerRuntime(memory.rt.value, valuePtr);
      return undefined;
    }
    // The jobs ran in this sandbox's one context: a count of jobs, or the exception.
    const result = memory.heapValueHandle(valuePtr);
    if (this.vm.typeof(result) === "number") {
      result.dispose();
      return undefined;
    }
    return result;
  }

  private async sliced(call: () => Promise<number>): Promise<number> {
    if (this.broken) throw new Error("the sandbox was stopped and cannot run anything more");
    try {
      return await this.slicer.sliced(call);
    } catch (err) {
      this.broken = true;
      throw err;
    }
  }

  private resolved(resultPtr: number): Evaluated {
    const { memory } = this;
    const errorPtr = memory.ffi.QTS_ResolveException(memory.ctx.value, resultPtr);
    if (errorPtr) {
      memory.ffi.QTS_FreeValuePointer(memory.ctx.value, resultPtr);
      return { error: memory.heapValueHandle(errorPtr) };
    }
    return { value: memory.heapValueHandle(resultPtr) };
  }

  /** Frees the QuickJS runtime, unless it was stopped mid-operation (then it is only dropped). */
  dispose(): void {
    if (this.broken) return;
    this.vm.dispose();
    this.runtime.dispose();
  }
}

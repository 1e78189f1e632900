// The js plugin: model-written JavaScript runs in a fresh QuickJS instance per
// call, inside real turns, with time and memory limits and nothing of the host,
// and never holds the isolate: it runs in slices, and a limit stops it inside
// a long built-in too. A handle left undisposed makes QuickJS abort when its
// runtime is freed, so every clean answer below also shows that the call
// released everything.
import { describe, expect, it } from "vitest";
import { jsPlugin, runScript } from "../../../plugins/js/index.ts";
import type { ToolCaller, ToolContext, ToolOutput } from "../../../plugins/index.ts";
import { postMessage, script, settled, unique, type View } from "../../support.ts";

const T = "sandbox";
const A = "coder";

const toolResults = (view: View) => view.transcript.filter((e) => e.role === "tool");

/** One turn in which the model calls js__run once per step, then answers "Done." */
async function turn(...codes: string[]): Promise<View> {
  const s = unique("js");
  await script(s, [...codes.map((code) => ({ toolCalls: [{ name: "js__run", arguments: { code } }] })), { text: "Done." }]);
  await postMessage(T, A, { text: `[s:${s}] compute`, conversation: s });
  const view = await settled(T, A, s);
  expect(view.status).toBe("idle");
  expect(view.transcript.at(-1)).toMatchObject({ role: "assistant", text: "Done." });
  return view;
}

describe("js__run in a turn", () => {
  it("returns the completion value as JSON with the console output", async () => {
    const view = await turn('console.log("squares of", [1, 2, 3], 4); const sq = [1, 2, 3].map((x) => x * x); ({ sq, sum: sq.reduce((a, b) => a + b) })');
    const [result] = toolResults(view);
    expect(result!.text).toBe('Result: {"sq":[1,4,9],"sum":14}\nConsole output:\nsquares of [1,2,3] 4');
    expect(result!.isError).toBeFalsy();
  });

  it("answers a thrown exception and a syntax error as errors the model can read", async () => {
    const view = await turn('console.log("before"); throw new TypeError("boom")', "let x = ;");
    const [thrown, syntax] = toolResults(view);
    expect(thrown).toMatchObject({ isError: true });
    expect(thrown!.text).toMatch(/^Uncaught TypeError: boom\n {4}at <eval> \(run\.js:1:\d+\)\nConsole output:\nbefore$/);
    expect(syntax).toMatchObject({ isError: true });
    expect(syntax!.text).toMatch(/^Uncaught SyntaxError: .*\n {4}at run\.js:1:\d+$/);
  });

  it("stops an endless loop at the time limit and the turn still finishes", async () => {
    const started = Date.now();
    const view = await turn("for (;;) {}");
    expect(toolResults(view)[0]).toMatchObject({ text: "CPU time limit: the code was stopped after 2000 ms of computation.", isError: true });
    expect(Date.now() - started).toBeLessThan(10_000);
  });

  it("stops a memory bomb at the memory limit", async () => {
    // One piece larger than the heap: met at once (filling it with small objects takes QuickJS seconds on a loaded machine, racing the CPU limit).
    const view = await turn('const hoard = ["x".repeat(2 ** 25)]; hoard.length');
    expect(toolResults(view)[0]).toMatchObject({ text: "Memory limit: the code used more than 16 MiB.", isError: true });
  });

  it("has no network, filesystem, modules or host objects", async () => {
    const names = ["fetch", "require", "process", "XMLHttpRequest", "WebSocket", "setTimeout", "Deno", "Bun", "std", "os", "WebAssembly", "navigator", "caches", "crypto"];
    const view = await turn(`({ ${names.map((n) => `${n}: typeof ${n}`).join(", ")} })`, 'import("fs")');
    const [globals, imported] = toolResults(view);
    expect(JSON.parse(globals!.text.replace(/^Result: /, ""))).toEqual(Object.fromEntries(names.map((n) => [n, "undefined"])));
    expect(imported).toMatchObject({ isError: true });
    expect(imported!.text).toMatch(/^Uncaught .*fs/);
  });

  it("keeps nothing between calls", async () => {
    const view = await turn("globalThis.leak = 42; Array.prototype.tainted = true; leak", "[typeof leak, [].tainted]");
    expect(toolResults(view).map((r) => r.text)).toEqual(["Result: 42", 'Result: ["undefined",null]']);
  });
});

const ctx = (config: Record<string, unknown> = {}): ToolContext => ({
  callKey: "k",
  alias: "js",
  tenant: T,
  agent: A,
  conversation: "c",
  audience: { kind: "channel" },
  config: jsPlugin.config!.parse(config),
  session: { get: () => undefined, set: () => {} },
});
const run = (code: string, config?: Record<string, unknown>) => jsPlugin.tools[0]!.call({ code }, ctx(config));

describe("the js plugin's run tool", () => {
  it("settles a returned promise and runs queued callbacks", async () => {
    expect(await run('Promise.resolve().then(() => console.log("later")); (async () => { await null; return 7; })()')).toEqual({
      text: "Result: 7\nConsole output:\nlater",
      isError: false,
    });
    expect(await run('(async () => { throw new RangeError("no") })()')).toMatchObject({ text: expect.stringMatching(/^Uncaught RangeError: no/), isError: true });
    expect(await run("new Promise(() => {})")).toEqual({ text: "The returned promise did not settle: the sandbox has no timers, and no tool call was still running.", isError: true });
  });

  it("reports values JSON cannot hold, and thrown non-errors", async () => {
    expect((await run("undefined")).text).toBe("Result: undefined");
    expect((await run("10n ** 20n")).text).toBe("Result: 100000000000000000000");
    expect((await run('"a string"')).text).toBe('Result: "a string"');
    expect(await run('throw { code: 7 }')).toEqual({ text: 'Uncaught {"code":7}', isError: true });
  });

  it("turns runaway recursion into a stack overflow error, and the next call still works", async () => {
    expect(await run("function f() { return f() + 1 } f()")).toMatchObject({ text: expect.stringMatching(/^Uncaught InternalError: stack overflow/), isError: true });
    expect((await run("1 + 2")).text).toBe("Result: 3");
  });

  it("stops a script that nests too deeply for the host's stack (QuickJS's own limit comes too late for JSON.parse), and the next call still works", async () => {
    expect(await run("JSON.parse('['.repeat(100_000) + ']'.repeat(100_000))")).toEqual({ text: "Stack limit: the code nested calls or values too deeply and was stopped.", isError: true });
    expect((await run("1 + 2")).text).toBe("Result: 3");
  });

  it("caps the output and the console", async () => {
    const big = await run('"x".repeat(50_000)');
    expect(big.text).toHaveLength(20_000 + "\n[output truncated at 20000 characters]".length);
    expect(big.text.endsWith("x\n[output truncated at 20000 characters]")).toBe(true);
    const chatty = await run("for (let i = 0; i < 5000; i++) console.log(i); 'ok'");
    expect(chatty.text).toBe(`Result: "ok"\nConsole output:\n${Array.from({ length: 1000 }, (_, i) => i).join("\n")}\n[4000 more console lines not collected]`);
  });

  it("reports a result whose serialisation never ends without hanging", async () => {
    expect(await run("({ toJSON() { for (;;) {} } })", { cpuMs: 100 })).toEqual({ text: "Result: [the result could not be serialised within the limits]", isError: false });
  });

  it("takes its time limit from the mount config, within a cap", async () => {
    const started = Date.now();
    expect(await run("for (;;) {}", { cpuMs: 100 })).toEqual({ text: "CPU time limit: the code was stopped after 100 ms of computation.", isError: true });
    expect(Date.now() - started).toBeLessThan(1_500);
    expect(jsPlugin.config!.safeParse({ cpuMs: 60_000 }).success).toBe(false);
    expect(jsPlugin.config!.safeParse({ memoryMiB: 1024 }).success).toBe(false);
    expect(jsPlugin.config!.safeParse({ timeoutMs: 2_000 }).success).toBe(false);
  });
});

/** A stand-in for the runtime's side: records each call and answers as `answer` says. */
function fakeTools(answer: (alias: string, tool: string, args: unknown) => Promise<ToolOutput> = async (alias, tool, args) => ({ text: `${alias}.${tool}(${JSON.stringify(args)})` })) {
  const calls: string[] = [];
  const caller: ToolCaller = {
    call(alias, tool, args) {
      calls.push(`${alias}.${tool}`);
      return answer(alias, tool, args);
    },
  };
  return { calls, caller };
}

describe("a script's tool calls (code mode), in the sandbox", () => {
  it("are made in the order the script makes them, run side by side, resolve with the text and reject with a ToolError", async () => {
    let releaseFirst!: () => void;
    const first = new Promise<void>((resolve) => (releaseFirst = resolve));
    const { calls, caller } = fakeTools(async (alias, tool, args) => {
      if (tool === "slow") await first;
      if (tool === "fast") setTimeout(releaseFirst, 10); // the fast one answers while the slow one is still out
      if (alias === "bad") return { text: "Refused: no.", isError: true };
      return { text: `${alias}.${tool}(${JSON.stringify(args)})` };
    });
    const output = await runScript(
      `(async () => {
        const [a, b] = await Promise.all([tools.crm.slow({ id: 1 }), tools.crm.fast()]);
        let c; try { await tools.bad.write({}); } catch (e) { c = [e instanceof Error, e.name, e.message]; }
        return [a, b, c];
      })()`,
      {},
      { caller },
    );
    expect(calls).toEqual(["crm.slow", "crm.fast", "bad.write"]);
    expect(output).toEqual({ text: `Result: ${JSON.stringify(['crm.slow({"id":1})', "crm.fast({})", [true, "ToolError", "Refused: no."]])}`, isError: false });
  });

  it("are limited in number: past the mount's maxToolCalls each call is rejected without being made", async () => {
    const { calls, caller } = fakeTools();
    const output = await runScript(
      "(async () => { const out = []; for (let i = 0; i < 3; i++) { try { out.push(await tools.a.b({ i })); } catch (e) { out.push(e.message); } } return out; })()",
      { maxToolCalls: 2 },
      { caller },
    );
    expect(calls).toHaveLength(2);
    expect(JSON.parse(output.text.replace(/^Result: /, ""))).toEqual(['a.b({"i":0})', 'a.b({"i":1})', "Tool call limit: a script may make at most 2 tool calls."]);
  });

  it("answer only once every call the script started has answered, awaited or not", async () => {
    let answered = false;
    const { caller } = fakeTools(() => new Promise((resolve) => setTimeout(() => ((answered = true), resolve({ text: "late" })), 50)));
    expect(await runScript("tools.a.fireAndForget({}); 'returned'", {}, { caller })).toEqual({ text: 'Result: "returned"', isError: false });
    expect(answered).toBe(true);
  });

  it("are stopped at the wall time limit when a tool does not answer, and everything is released", async () => {
    const { caller } = fakeTools(() => new Promise(() => {}));
    expect(await runScript("(async () => await tools.slow.never({}))()", { wallMs: 100 }, { caller })).toEqual({
      text: "Wall time limit: the script was stopped after 100 ms, tool calls included (1 calls made, 1 unanswered).",
      isError: true,
    });
    expect((await run("1 + 2")).text).toBe("Result: 3");
  });

  it("stop the script when the runtime cannot be reached (its task is tried again)", async () => {
    const { caller } = fakeTools(() => Promise.reject(new Error("the object was reset")));
    expect(await runScript("(async () => { try { await tools.a.b({}); } catch { return 'swallowed'; } })()", {}, { caller })).toEqual({
      text: "Stopped: a tool call could not reach the agent (the object was reset).",
      isError: true,
    });
  });

  it("are refused where no caller is given, and awaiting `tools` itself calls nothing", async () => {
    const { calls, caller } = fakeTools();
    expect((await runScript("(async () => { await tools; await tools.crm; return typeof tools.crm.then; })()", {}, { caller })).text).toBe('Result: "undefined"');
    expect(calls).toEqual([]);
    expect((await run("(async () => { try { await tools.a.b({}); } catch (e) { return e.message; } })()")).text).toBe('Result: "Tools cannot be called from this sandbox."');
  });
});

describe("a script that computes", () => {
  const timer = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

  it("does not hold the isolate: a timer set while it spins fires long before it is stopped", async () => {
    let stopped = false;
    const spinning = runScript("for (;;) {}", { cpuMs: 2_000 }).then((output) => ((stopped = true), output));
    await timer(50);
    expect(stopped).toBe(false);
    expect(await spinning).toEqual({ text: "CPU time limit: the code was stopped after 2000 ms of computation.", isError: true });
  });

  it("is stopped inside one long built-in call (a BigInt's toString), and the next script runs", async () => {
    expect(await runScript("(10n ** 150000n).toString().length", { cpuMs: 50 })).toEqual({ text: "CPU time limit: the code was stopped after 50 ms of computation.", isError: true });
    expect((await run("1 + 2")).text).toBe("Result: 3");
  });

  it("stops a loop of long built-ins at the wall limit", async () => {
    expect(await runScript("for (;;) (10n ** 150000n).toString()", { wallMs: 300, cpuMs: 10_000 })).toEqual({
      text: "Wall time limit: the script was stopped after 300 ms, tool calls included (0 calls made, 0 unanswered).",
      isError: true,
    });
  });

  it("stops a regular expression that backtracks without end", async () => {
    expect(await runScript("/(a+)+$/.test('a'.repeat(40) + 'b')", { cpuMs: 50 })).toEqual({ text: "CPU time limit: the code was stopped after 50 ms of computation.", isError: true });
  });

  it("takes a tool's answer that came while it computed between its slices, never into a paused one", async () => {
    const { caller } = fakeTools(() => new Promise((resolve) => setTimeout(() => resolve({ text: "early" }), 5)));
    const output = await runScript("(async () => { const pending = tools.a.quick({}); let n = 0; for (let i = 0; i < 2e6; i++) n += i; return [await pending, n]; })()", {}, { caller });
    expect(output).toEqual({ text: `Result: ${JSON.stringify(["early", 1999999000000])}`, isError: false });
  });

  it("runs side by side with another script, each in an instance of its own", async () => {
    const [spun, summed] = await Promise.all([
      runScript("for (;;) {}", { cpuMs: 300 }),
      runScript("let s = 0n; for (let i = 0n; i < 200000n; i++) s += i * i; s", {}),
    ]);
    expect(spun.text).toBe("CPU time limit: the code was stopped after 300 ms of computation.");
    expect(summed).toEqual({ text: `Result: ${(199999n * 200000n * 399999n) / 6n}`, isError: false });
  });
});

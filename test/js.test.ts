// The js plugin: model-written JavaScript runs in a fresh QuickJS runtime per
// call, inside real turns, with time and memory limits and nothing of the host.
// A handle left undisposed makes QuickJS abort when its runtime is freed, so
// every clean answer below also shows that the call released everything.
import { describe, expect, it } from "vitest";
import { jsPlugin } from "../plugins/js.ts";
import type { ToolContext } from "../plugins/index.ts";
import { postMessage, script, settled, unique, type View } from "./support.ts";

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
    expect(toolResults(view)[0]).toMatchObject({ text: "Time limit: the code was stopped after 2000 ms.", isError: true });
    expect(Date.now() - started).toBeLessThan(10_000);
  });

  it("stops a memory bomb at the memory limit", async () => {
    const view = await turn("const hoard = []; for (;;) hoard.push({ n: hoard.length, s: String(hoard.length) });");
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
    expect(await run("new Promise(() => {})")).toEqual({ text: "The returned promise did not settle: the sandbox has no timers or I/O.", isError: true });
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

  it("caps the output and the console", async () => {
    const big = await run('"x".repeat(50_000)');
    expect(big.text).toHaveLength(20_000 + "\n[output truncated at 20000 characters]".length);
    expect(big.text.endsWith("x\n[output truncated at 20000 characters]")).toBe(true);
    const chatty = await run("for (let i = 0; i < 5000; i++) console.log(i); 'ok'");
    expect(chatty.text).toBe(`Result: "ok"\nConsole output:\n${Array.from({ length: 1000 }, (_, i) => i).join("\n")}\n[4000 more console lines not collected]`);
  });

  it("reports a result whose serialisation never ends without hanging", async () => {
    expect(await run("({ toJSON() { for (;;) {} } })", { timeoutMs: 100 })).toEqual({ text: "Result: [the result could not be serialised within the limits]", isError: false });
  });

  it("takes its time limit from the mount config, within a cap", async () => {
    const started = Date.now();
    expect(await run("for (;;) {}", { timeoutMs: 100 })).toEqual({ text: "Time limit: the code was stopped after 100 ms.", isError: true });
    expect(Date.now() - started).toBeLessThan(1_500);
    expect(jsPlugin.config!.safeParse({ timeoutMs: 60_000 }).success).toBe(false);
    expect(jsPlugin.config!.safeParse({ memoryMiB: 1024 }).success).toBe(false);
  });
});

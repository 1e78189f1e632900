// Turns driven by a provider that streams as OpenAI does: tool-call arguments
// cut mid-JSON, two parallel calls interleaved chunk by chunk, and usage in a
// final chunk with `choices: []`. The calls still run once each with their
// whole arguments, and the usage is recorded.
import { describe, expect, it } from "vitest";
import { ledgerAppends, postMessage, script, settled, unique, type ScriptStep, type View } from "../../support.ts";

const TENANT = "streaming";
const AGENT = "assistant";

/** Runs one turn of `steps` and returns the settled conversation. */
async function turn(steps: ScriptStep[]): Promise<View> {
  const s = unique("stream");
  await script(s, steps);
  const res = await postMessage(TENANT, AGENT, { text: `[s:${s}] go`, conversation: s });
  expect(res.status).toBe(202);
  return settled(TENANT, AGENT, s);
}

/** The calls the model made, and what each of their results said, in order. */
function callsAndResults(view: View) {
  const calls = view.transcript.flatMap((e) => e.toolCalls ?? []);
  const results = view.transcript.filter((e) => e.role === "tool");
  return { calls, results };
}

// Text a JSON encoder escapes, and characters beyond one UTF-16 unit: cut pieces must rejoin exactly.
const awkward = (tag: string) => `${tag} "quoted" \\ back—slash ✓ 😀 ${unique("e")}`;

describe("a streamed model reply", () => {
  it("tool-call arguments split mid-JSON → the call runs once with its whole arguments; usage recorded", async () => {
    const entry = awkward("split");
    const view = await turn([
      { toolCalls: [{ name: "ledger__append", arguments: { entry } }], argumentChunk: 3, usage: { input: 1000, output: 31 } },
      { text: "Appended it.", argumentChunk: 2, usage: { input: 2000, output: 7 } },
    ]);
    expect(view.status).toBe("idle");
    const { calls, results } = callsAndResults(view);
    expect(calls.map((c) => [c.name, c.arguments])).toEqual([["ledger__append", { entry }]]);
    expect(results.map((r) => r.text)).toEqual([`appended "${entry}" (1)`]);
    expect(await ledgerAppends(entry)).toHaveLength(1);
    expect(view.transcript.at(-1)!.text).toBe("Appended it.");
    expect(view.usage).toMatchObject({ inputTokens: 3000, outputTokens: 38 });
  });

  it("two parallel tool calls interleaved chunk by chunk → both run once, each with its own arguments; usage recorded", async () => {
    const [first, second] = [awkward("first"), awkward("second")];
    const view = await turn([
      {
        toolCalls: [
          { name: "ledger__append", arguments: { entry: first }, id: "call_a" },
          { name: "ledger__append", arguments: { entry: second }, id: "call_b" },
        ],
        interleave: true,
        argumentChunk: 4,
        usage: { input: 500, output: 60 },
      },
      { text: "Both done.", usage: { input: 700, output: 3 } },
    ]);
    expect(view.status).toBe("idle");
    const { calls, results } = callsAndResults(view);
    expect(calls).toEqual([
      { id: "call_a", name: "ledger__append", arguments: { entry: first } },
      { id: "call_b", name: "ledger__append", arguments: { entry: second } },
    ]);
    expect(results.map((r) => [r.toolCallId, r.text])).toEqual([
      ["call_a", `appended "${first}" (1)`],
      ["call_b", `appended "${second}" (1)`],
    ]);
    expect(await ledgerAppends(first)).toHaveLength(1);
    expect(await ledgerAppends(second)).toHaveLength(1);
    expect(view.usage).toMatchObject({ inputTokens: 1200, outputTokens: 63 });
  });

  it("usage only in the final chunk with choices: [] → recorded per call and summed over the turn", async () => {
    const entry = awkward("usage");
    const view = await turn([
      { toolCalls: [{ name: "ledger__append", arguments: { entry } }], usage: { input: 4321, output: 17 } },
      { text: "Counted.", usage: { input: 4400, output: 5 } },
    ]);
    expect(await ledgerAppends(entry)).toHaveLength(1);
    expect(view.usage).toMatchObject({ inputTokens: 8721, outputTokens: 22 });
  });
});

// Memory across conversations: a note saved in one conversation is recalled in
// another, and it survives the object being evicted.
import { describe, expect, it } from "vitest";
import { evict } from "./agents.ts";
import { postMessage, script, settled, unique } from "./support.ts";

const T = "memory";
const A = "keeper";

describe("the memory plugin", () => {
  it("keeps notes across conversations and evictions", async () => {
    const first = unique("mem");
    const second = unique("mem");
    await script(first, [{ toolCalls: [{ name: "memory__remember", arguments: { key: "budget", text: "The Q3 budget is 40k." } }] }, { text: "Noted." }]);
    await script(second, [{ toolCalls: [{ name: "memory__recall", arguments: { phrase: "budget" } }] }, { text: "It is 40k." }]);

    await postMessage(T, A, { text: `[s:${first}] remember the budget`, conversation: first });
    expect((await settled(T, A, first)).transcript.find((e) => e.role === "tool")!.text).toBe('Remembered "budget".');
    await evict(T, A);

    await postMessage(T, A, { text: `[s:${second}] what was the budget?`, conversation: second });
    const recalled = (await settled(T, A, second)).transcript.find((e) => e.role === "tool")!.text;
    expect(recalled).toMatch(/^- budget \(\d{4}-[^)]+\): The Q3 budget is 40k\.$/);
  });

  it("is per agent: another agent of the same tenant recalls nothing", async () => {
    const s = unique("mem");
    await script(s, [{ toolCalls: [{ name: "memory__recall", arguments: {} }] }, { text: "Nothing." }]);
    await postMessage(T, "stranger", { text: `[s:${s}] what do you remember?`, conversation: s });
    expect((await settled(T, "stranger", s)).transcript.find((e) => e.role === "tool")!.text).toBe("No notes yet.");
  });

  it("a key named like an Object.prototype member is a key like any other", async () => {
    const s = unique("mem");
    await script(s, [
      { toolCalls: [{ name: "memory__forget", arguments: { key: "constructor" } }, { name: "memory__remember", arguments: { key: "toString", text: "a note" } }, { name: "memory__recall", arguments: {} }] },
      { text: "Done." },
    ]);
    await postMessage(T, "protos", { text: `[s:${s}] tidy up`, conversation: s });
    const tools = (await settled(T, "protos", s)).transcript.filter((e) => e.role === "tool").map((e) => e.text);
    expect(tools[0]).toBe('There was no note "constructor".');
    expect(tools[1]).toBe('Remembered "toString".');
    expect(tools[2]).toMatch(/^- toString \(.+\): a note$/);
  });
});

// Subagents (issue 26, acceptance 1): a parent's `delegate` calls run child
// conversations of the same object, three at once and the rest queued; each
// child's answer reaches the parent's call once; stopping the parent stops its
// children; a child cannot delegate and sees only its mounts; its model calls
// are counted as a child's in the tenant's ledger.
import { describe, expect, it } from "vitest";
import { getConversation, postMessage, providerRequests, releaseProvider, script, settled, unique, waitFor, type View } from "./support.ts";

const T = "delegates";
const A = "lead";

type Family = { parent: string | null; children: { id: string; state: string; task: string }[] };
const familyOf = async (conversation: string) => ((await getConversation(T, A, conversation)) as View & { family: Family }).family;
const states = async (conversation: string) => (await familyOf(conversation)).children.map((c) => c.state);
const toolNames = (request: { body: { tools?: unknown[] } }) => (request.body.tools as { function: { name: string } }[]).map((t) => t.function.name);

/** A parent scenario whose first step delegates one task per child scenario, and whose second answers. */
async function delegating(children: string[], answer: string, more: { mounts?: string[] } = {}) {
  const parent = unique("parent");
  const calls = children.map((child, i) => ({ name: "delegate", id: `d${i}`, arguments: { instructions: `[s:${child}] task ${i + 1}`, ...more } }));
  await script(parent, [{ toolCalls: calls }, { text: answer }]);
  return parent;
}

describe("delegate", () => {
  it("runs three children at once, the fourth when a slot frees, and gives each answer to its call once", async () => {
    const children = [unique("c1"), unique("c2"), unique("c3"), unique("c4")];
    for (const [i, child] of children.entries()) await script(child, [{ hold: true, text: `answer ${i + 1}` }]);
    const parent = await delegating(children, "all four are done");
    await postMessage(T, A, { text: `[s:${parent}] split this in four`, conversation: parent });

    await waitFor("three children asking the model", async () => (await Promise.all(children.slice(0, 3).map(providerRequests))).every((r) => r.length === 1));
    expect(await states(parent)).toEqual(["running", "running", "running", "queued"]);
    expect(await providerRequests(children[3]!)).toHaveLength(0);

    await releaseProvider(children[0]!);
    await waitFor("the fourth child once the first answered", async () => (await providerRequests(children[3]!)).length === 1);
    expect(await states(parent)).toEqual(["answered", "running", "running", "running"]);
    for (const child of children.slice(1)) await releaseProvider(child);

    const view = await waitFor("the parent's answer", async () => {
      const v = await settled(T, A, parent);
      return v.transcript.at(-1)?.text === "all four are done" ? v : undefined;
    });
    const results = view.transcript.filter((e) => e.role === "tool");
    expect(results.map((e) => [e.toolCallId, e.text, e.isError])).toEqual([
      ["d0", "answer 1", false],
      ["d1", "answer 2", false],
      ["d2", "answer 3", false],
      ["d3", "answer 4", false],
    ]);
    // Once each: the parent's second call carries each answer once, and each child asked its model once.
    const second = (await providerRequests(parent))[1]!;
    expect(second.body.messages.filter((m) => m.role === "tool").map((m) => m.content)).toEqual(["answer 1", "answer 2", "answer 3", "answer 4"]);
    for (const child of children) expect(await providerRequests(child)).toHaveLength(1);

    const family = await familyOf(parent);
    expect(family.children.map((c) => [c.state, c.task])).toEqual(children.map((child, i) => ["answered", `[s:${child}] task ${i + 1}`]));
    const first = await getConversation(T, A, family.children[0]!.id);
    expect(first.transcript.map((e) => [e.role, e.text])).toEqual([
      ["user", `[s:${children[0]}] task 1`],
      ["assistant", "answer 1"],
    ]);
    expect(((first as View & { family: Family }).family).parent).toBe(parent);
  });
});



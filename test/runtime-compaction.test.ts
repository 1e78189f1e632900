// Compaction: a long conversation is summarised into a handover note, on
// request (`compact`) or on the way when the next request would fill most of
// the model's context window (8,000 tokens in the test provider).
import { describe, expect, it } from "vitest";
import { agent } from "./agents.ts";
import { postMessage, providerRequests, script, settled, unique } from "./support.ts";

const T = "compaction";
const A = "scribe";

const firstText = (r: { body: { messages: { role: string; content: unknown }[] } }) =>
  r.body.messages.filter((m) => m.role !== "system").map((m) => (typeof m.content === "string" ? m.content : JSON.stringify(m.content)));

describe("compaction", () => {
  it("a request that would fill the context window is preceded by a summary of the earlier turns", async () => {
    const s = unique("long");
    const log = "error: disk full on /var\n".repeat(1000); // ~25,000 characters ≈ 6,250 tokens
    await script(s, [{ text: "That log says the disk is full." }, { text: `[s:${s}] The person pasted a log showing the disk on /var is full.` }, { text: "Delete old logs in /var/log." }]);
    await postMessage(T, A, { text: `[s:${s}] what does this say?\n${log}`, conversation: s });
    await settled(T, A, s);
    await postMessage(T, A, { text: "how do I fix it?", conversation: s });
    const view = await settled(T, A, s);

    const [, compaction, next] = await providerRequests(s);
    expect(compaction!.body.messages[0]).toMatchObject({ role: "system", content: expect.stringMatching(/^You write handover notes/) });
    expect(firstText(compaction!).join("\n")).toContain("error: disk full on /var");
    expect(firstText(compaction!).join("\n")).not.toContain("how do I fix it?");
    // The next call sees the summary, then the current turn's message, and not the log itself.
    expect(firstText(next!)).toEqual([`<handover>\n[s:${s}] The person pasted a log showing the disk on /var is full.\n</handover>`, "how do I fix it?"]);
    expect(view.transcript.at(-1)).toMatchObject({ role: "assistant", text: "Delete old logs in /var/log." });
    expect(view.transcript.at(-2)!.text).toMatch(/^Earlier messages were compacted into a summary/);
  });

  it("`compact` summarises on request; a later turn starts from the summary", async () => {
    const s = unique("manual");
    await script(s, [{ text: "Noted: the budget is 40k." }, { text: `[s:${s}] Budget is 40k.` }, { text: "It is 40k." }]);
    await postMessage(T, A, { text: `[s:${s}] remember the budget is 40k`, conversation: s });
    await settled(T, A, s);
    const result = await agent(T, A).submit({ tenant: T, agent: A }, { id: unique("c"), kind: "command", command: "compact", conversation: s, user: { platform: "api", id: "admin" } });
    expect(result.notice).toBe("Compacting 2 messages into a summary.");
    await settled(T, A, s);
    await postMessage(T, A, { text: "what is the budget?", conversation: s });
    await settled(T, A, s);
    const last = (await providerRequests(s)).at(-1)!;
    expect(firstText(last)).toEqual([`<handover>\n[s:${s}] Budget is 40k.\n</handover>`, "what is the budget?"]);
  });
});

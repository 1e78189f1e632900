// Steer vs interrupt: a message while a turn runs reaches the model before its
// next call and cancels nothing; an interrupt ends the turn, discards its job,
// drops the late reply, and leaves a note the model sees next time.
import { describe, expect, it } from "vitest";
import { rows } from "../../agents.ts";
import { answered, getConversation, postMessage, providerRequests, releaseProvider, script, settled, unique, waitFor } from "../../support.ts";

const T = "steering";
const A = "pilot";

function texts(request: { body: { messages: { role: string; content: unknown }[] } }): string[] {
  return request.body.messages.map((m) => (typeof m.content === "string" ? m.content : JSON.stringify(m.content)));
}

describe("steer", () => {
  it("reaches the model before its next call without aborting the one in flight", async () => {
    const s = unique("steer");
    await script(s, [{ hold: true, text: "first answer" }, { text: "answer with the steer in mind" }]);
    await postMessage(T, A, { text: `[s:${s}] write a poem`, conversation: s });
    await waitFor("the first model call", async () => (await providerRequests(s)).length === 1);

    const steer = await postMessage(T, A, { text: "make it about the sea", conversation: s });
    expect(await steer.json()).toMatchObject({ accepted: true, status: "waiting_model" });
    await releaseProvider(s);

    const view = await settled(T, A, s);
    expect(view.transcript.map((e) => [e.role, e.text, e.steer ?? null])).toEqual([
      ["user", `[s:${s}] write a poem`, false],
      ["assistant", "first answer", null],
      ["user", "make it about the sea", true],
      ["assistant", "answer with the steer in mind", null],
    ]);
    const requests = await providerRequests(s);
    expect(requests).toHaveLength(2);
    expect(texts(requests[0]!)).not.toContain("make it about the sea");
    expect(texts(requests[1]!)).toContain("make it about the sea");
  });

  it("an explicit steer between tool calls joins before the next model call", async () => {
    const s = unique("steer");
    await script(s, [{ hold: true, toolCalls: [{ name: "clock__now" }] }, { text: "done" }]);
    await postMessage(T, A, { text: `[s:${s}] time?`, conversation: s });
    await waitFor("the first model call", async () => (await providerRequests(s)).length === 1);
    await postMessage(T, A, { text: "in Paris please", conversation: s, kind: "steer" });
    await releaseProvider(s);
    const view = await settled(T, A, s);
    expect(view.transcript.map((e) => e.role)).toEqual(["user", "assistant", "tool", "user", "assistant"]);
    expect(texts((await providerRequests(s))[1]!).at(-1)).toBe("in Paris please");
  });
});

describe("interrupt", () => {
  it("ends the turn, discards the job, drops the late reply, and the model later sees a note", async () => {
    const s = unique("stop");
    await script(s, [{ hold: true, text: "LATE REPLY" }, { text: "fresh start" }]);
    await postMessage(T, A, { text: `[s:${s}] count to a million`, conversation: s });
    await waitFor("the model call", async () => (await providerRequests(s)).length === 1);

    // docs/runbook.md's shape: an interrupt carries no text.
    const res = await postMessage(T, A, { kind: "interrupt", conversation: s });
    expect(await res.json()).toMatchObject({ accepted: true, status: "idle", notice: "Stopped the running turn." });
    expect(await rows(T, A, "SELECT status FROM model_jobs WHERE conversation = ?", s)).toEqual([{ status: "discarded" }]);

    await releaseProvider(s);
    // The consumer reads the job before calling the provider and delivers after; the discarded job is ignored.
    await waitFor("the late reply to be sent", async () => (await providerRequests(s))[0]?.responded === true);
    const stopped = await getConversation(T, A, s);
    expect(stopped.status).toBe("idle");
    expect(stopped.transcript.map((e) => e.text)).not.toContain("LATE REPLY");
    expect(stopped.transcript.at(-1)?.role).toBe("note");

    await postMessage(T, A, { text: "hello again", conversation: s });
    const after = await settled(T, A, s);
    expect(after.transcript.at(-1)).toMatchObject({ role: "assistant", text: "fresh start" });
    expect(after.transcript.map((e) => e.text)).not.toContain("LATE REPLY");
    const next = texts((await providerRequests(s))[1]!);
    expect(next.some((t) => t.includes("[runtime note] The person stopped the previous turn"))).toBe(true);
  });

  it("keeps a steer that was waiting when the turn is stopped", async () => {
    const s = unique("stop");
    await script(s, [{ hold: true, text: "LATE" }, { text: "next" }]);
    await postMessage(T, A, { text: `[s:${s}] long task`, conversation: s });
    await waitFor("the model call", async () => (await providerRequests(s)).length === 1);
    await postMessage(T, A, { text: "also check the logs", conversation: s });
    await postMessage(T, A, { text: "stop", conversation: s, kind: "interrupt" });
    await releaseProvider(s);
    const view = await getConversation(T, A, s);
    expect(view.transcript.map((e) => [e.role, e.text])).toEqual([
      ["user", `[s:${s}] long task`],
      ["user", "also check the logs"],
      ["note", expect.stringMatching(/^The person stopped the previous turn/)],
    ]);
  });

  it("a message that waited on a turn that then failed starts the next turn", async () => {
    const s = unique("resume");
    await script(s, [{ hold: true, status: 400, error: "bad request" }, { text: "answering the second message" }]);
    await postMessage(T, A, { text: `[s:${s}] first`, conversation: s });
    await waitFor("the model call", async () => (await providerRequests(s)).length === 1);
    await postMessage(T, A, { text: "second", conversation: s });
    await releaseProvider(s);
    const view = await answered(T, A, s, "answering the second message");
    expect(view.transcript.map((e) => e.text)).toEqual([`[s:${s}] first`, "second", "answering the second message"]);
  });

  it("on an idle conversation says nothing is running", async () => {
    const s = unique("stop");
    await script(s, [{ text: "hi" }]);
    await postMessage(T, A, { text: `[s:${s}] hi`, conversation: s });
    await settled(T, A, s);
    const res = await postMessage(T, A, { text: "stop", conversation: s, kind: "interrupt" });
    expect(await res.json()).toMatchObject({ notice: "Nothing is running in this conversation." });
  });
});

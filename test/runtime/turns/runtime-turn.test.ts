import { describe, expect, it } from "vitest";
import { getConversation, postMessage, providerRequests, script, settled, unique } from "../../support.ts";

describe("a turn through the real queue and the fake provider", () => {
  it("answers a message and records the transcript", async () => {
    const s = unique("turn");
    await script(s, [{ text: "Hello from the fake model." }]);
    const res = await postMessage("acme", "helper", { text: `[s:${s}] hi`, conversation: s });
    expect(res.status).toBe(202);
    expect(await res.json()).toMatchObject({ accepted: true, conversation: s });
    const view = await settled("acme", "helper", s);
    expect(view.status).toBe("idle");
    expect(view.transcript.map((e) => [e.role, e.text])).toEqual([
      ["user", `[s:${s}] hi`],
      ["assistant", "Hello from the fake model."],
    ]);
    const requests = await providerRequests(s);
    expect(requests).toHaveLength(1);
    expect(requests[0]!.authorized).toBe(true);
  });

  it("runs a tool call through the gateway and feeds the result back", async () => {
    const s = unique("tool");
    await script(s, [{ toolCalls: [{ name: "clock__now", arguments: {} }] }, { text: "It is now." }]);
    await postMessage("acme", "helper", { text: `[s:${s}] time?`, conversation: s });
    const view = await settled("acme", "helper", s);
    expect(view.transcript.map((e) => e.role)).toEqual(["user", "assistant", "tool", "assistant"]);
    expect(view.transcript[2]!.text).toMatch(/^\d{4}-\d\d-\d\dT/);
    const second = (await providerRequests(s))[1]!;
    expect(second.body.messages.map((m) => m.role)).toEqual(["system", "user", "assistant", "tool"]);
  });

  it("unknown conversation → 404", async () => {
    await expect(getConversation("acme", "helper", "nope")).rejects.toThrow(/404/);
  });
});

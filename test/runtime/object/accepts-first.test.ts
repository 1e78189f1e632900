// Acks first (runtime/object/accepts-first.ts): while an accept of this isolate
// has been under way for a while, an object's pass waits, within a bound.
import { describe, expect, it } from "vitest";
import { accepted, ACK_PATIENCE_MS } from "../../../runtime/object/index.ts";
import { postMessage, providerRequests, script, settled, unique } from "../../support.ts";

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** An accept held open until `release` is called, already under way past the passes' patience. */
async function holdAnAccept(): Promise<{ release: () => void; done: Promise<void> }> {
  let release!: () => void;
  const done = accepted(() => new Promise<void>((resolve) => (release = resolve)));
  await pause(ACK_PATIENCE_MS + 10);
  return { release, done };
}

describe("acks first", () => {
  it("a pass waits while a request has long been under way, and runs once it is answered", async () => {
    const s = unique("acks-first");
    await script(s, [{ text: "After the ack." }]);
    const held = await holdAnAccept();
    try {
      expect((await postMessage("acme", "helper", { text: `[s:${s}] hi`, conversation: s })).status).toBe(202);
      await pause(120);
      // The event is durable, and no pass has asked the model yet.
      expect(await providerRequests(s)).toHaveLength(0);
    } finally {
      held.release();
      await held.done;
    }
    const view = await settled("acme", "helper", s);
    expect(view.transcript.map((e) => e.text)).toEqual([`[s:${s}] hi`, "After the ack."]);
  });

  it("a pass waits for the accepts only so long: a steady stream of events cannot hold a turn back", async () => {
    const s = unique("acks-bound");
    await script(s, [{ text: "Answered meanwhile." }]);
    const held = await holdAnAccept();
    try {
      await postMessage("acme", "helper", { text: `[s:${s}] hi`, conversation: s });
      const view = await settled("acme", "helper", s);
      expect(view.transcript.map((e) => e.text)).toEqual([`[s:${s}] hi`, "Answered meanwhile."]);
    } finally {
      held.release();
      await held.done;
    }
  });
});

// The courier's text as its model call writes it (runtime/courier/partial-texts.ts),
// heard the way a Responses stream hears it: a listener that joins while the
// call writes gets its text so far, and one that reads slowly gets fewer,
// larger pieces, each going on where the last ended, never a backlog.
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { courierStub, partialText, type PartialText } from "../../../runtime/courier/index.ts";
import { modelLane } from "../../../runtime/effects/index.ts";
import { postMessage, providerRequests, script, settled, unique, waitFor } from "../../support.ts";

const TENANT = "partials";
const AGENT = "assistant";

describe("a model call's text, heard from its courier", () => {
  it("reaches a late, slow listener as its text so far, then in fewer, larger pieces that go on where each ended", async () => {
    const s = unique("partial");
    // 40 pieces of 5 characters, 50 ms apart: written over 2 s.
    const text = Array.from({ length: 40 }, (_, i) => `w${String(i).padStart(2, "0")}, `).join("");
    await script(s, [{ text, argumentChunk: 5, chunkDelayMs: 50 }]);
    expect((await postMessage(TENANT, AGENT, { text: `[s:${s}] go`, conversation: s })).status).toBe(202);
    await waitFor("the model to be asked", async () => (await providerRequests(s)).length === 1);
    // Joining late: a few pieces have been written by now.
    await new Promise((resolve) => setTimeout(resolve, 400));
    const lane = modelLane(s);
    const reader = (await courierStub(env, { tenant: TENANT, agent: AGENT, lane }).listen(lane)).getReader();
    const decoder = new TextDecoder();
    const heard: PartialText[] = [];
    const done = settled(TENANT, AGENT, s).then(() => null);
    for (let buffer = ""; ; ) {
      const read = await Promise.race([reader.read(), done]);
      if (!read || read.done) break;
      buffer += decoder.decode(read.value, { stream: true });
      const lines = buffer.split("\n");
      buffer = lines.pop()!;
      heard.push(...lines.map((line) => partialText.parse(JSON.parse(line))));
      // A slow reader: 300 ms between reads, six pieces' time.
      await new Promise((resolve) => setTimeout(resolve, 300));
    }
    await reader.cancel();
    expect(heard.length).toBeGreaterThan(1);
    // The first is the text so far (more than one piece), from its start.
    expect(heard[0]!.at).toBe(0);
    expect(heard[0]!.delta.length).toBeGreaterThan(5);
    // One call; each piece goes on where the last ended; together, the start of the whole text.
    expect(new Set(heard.map((p) => p.calledAt)).size).toBe(1);
    heard.slice(1).forEach((piece, i) => expect(piece.at).toBe(heard[i]!.at + heard[i]!.delta.length));
    expect(text.startsWith(heard.map((p) => p.delta).join(""))).toBe(true);
    // Fewer, larger pieces than were written: what came meanwhile is sent as one.
    expect(heard.length).toBeLessThan(20);
    expect(Math.max(...heard.slice(1).map((p) => p.delta.length))).toBeGreaterThan(5);
  });
});

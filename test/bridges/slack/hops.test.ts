// The hops of a turn (issue 22): effects carry their work, and an event or a
// report starts its pass itself, so a turn costs the agent's object a handful
// of calls. Counted by the object itself (every RPC and alarm into it is one
// call in busy_hours), read from inside it, which is no call.
import { runInDurableObject } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { agent } from "../../agents.ts";
import { script, unique, waitFor } from "../../support.ts";
import { AGENT, messageEnvelope, newTs, postEvent, slackId, statusFinal, threadMessages } from "./helpers.ts";

const testEnv = (await import("cloudflare:workers")).env as unknown as Record<string, string>;

/** Waits until the object has nothing left to do, then reads how many calls it took. */
async function callsWhenSettled(team: string): Promise<number> {
  const stub = agent(team, AGENT);
  return waitFor("the object to settle", () =>
    runInDurableObject(stub, async (_instance, state) => {
      const open = state.storage.sql.exec<{ n: number }>("SELECT COUNT(*) AS n FROM effects").one().n;
      if (open > 0 || (await state.storage.getAlarm()) !== null) return undefined;
      return state.storage.sql.exec<{ calls: number }>("SELECT COALESCE(SUM(handlers), 0) AS calls FROM busy_hours").one().calls;
    }),
  );
}

describe("the calls a Slack turn makes into the agent's object", () => {
  it("a plain turn: at most 5 (the event; the reports of the status post, the model call, and the reply sent with the final status)", async () => {
    const team = slackId("T");
    const channel = slackId("C");
    const s = unique("plain");
    await script(s, [{ text: "Plainly answered." }]);
    await postEvent(messageEnvelope({ team, channel, ts: newTs(), text: `[s:${s}] hello` }));
    await statusFinal(channel, "Done.");
    const calls = await callsWhenSettled(team);
    expect((await threadMessages(channel)).some((m) => m.body.markdown_text === "Plainly answered.")).toBe(true);
    expect(calls).toBeLessThanOrEqual(5);
  });

  it("a turn with a remote tool call: at most 10", async () => {
    const team = slackId("T");
    const channel = slackId("C");
    const s = unique("tool");
    await script(s, [{ toolCalls: [{ name: "api__get", arguments: { url: `${testEnv.FAKE_REMOTE_URL}/echo` } }] }, { text: "Fetched." }]);
    await postEvent(messageEnvelope({ team, channel, ts: newTs(), text: `[s:${s}] fetch it` }));
    await statusFinal(channel, "Done.");
    const calls = await callsWhenSettled(team);
    expect((await threadMessages(channel)).some((m) => m.body.markdown_text === "Fetched.")).toBe(true);
    expect(calls).toBeLessThanOrEqual(10);
  });
});

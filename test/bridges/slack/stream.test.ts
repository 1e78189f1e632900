// Replies streamed into a Slack thread while the model writes them (issue 17):
// Slack's own stream where the workspace has it, one message edited at most once
// a second where it does not; the object's outbox finishes the message, a
// courier cut short mid-stream leaves one message with the whole reply, and the
// object is not called per chunk.
import { env } from "cloudflare:workers";
import { runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { agent, courier, evictCourier } from "../../agents.ts";
import { splitForSlack } from "../../../bridges/slack/mrkdwn.ts";
import { slackOutbound } from "../../../bridges/slack/outbound.ts";
import { providerRequests, script, settled, unique, waitFor } from "../../support.ts";
import { AGENT, conversationOf, messageEnvelope, newTs, postCommand, postEvent, slackCalls, slackId, statusFinal } from "./helpers.ts";

const FAKE_SLACK_URL = (env as unknown as Record<string, string>).FAKE_SLACK_URL!;

interface FakeMessage {
  channel: string;
  ts: string;
  thread_ts?: string;
  text: string;
  blocks?: unknown[];
  streaming?: boolean;
}

/** The channel's messages as the fake holds them now, without the turn's status message (it has blocks). */
async function replies(channel: string): Promise<FakeMessage[]> {
  const all: FakeMessage[] = await (await fetch(`${FAKE_SLACK_URL}/_control/messages?${new URLSearchParams({ channel })}`)).json();
  return all.filter((m) => !m.blocks);
}

/** A reply written in pieces of `size` characters, `delayMs` apart: long enough to be streamed. */
function slowly(text: string, size: number, delayMs: number) {
  return { text, argumentChunk: size, chunkDelayMs: delayMs };
}

async function ask(s: string, o: { refuse?: boolean } = {}) {
  const team = slackId("T");
  const channel = slackId("C");
  const ts = newTs();
  if (o.refuse) await fetch(`${FAKE_SLACK_URL}/_control/refuse-streaming`, { method: "POST", body: JSON.stringify({ channel }) });
  expect((await postEvent(messageEnvelope({ team, channel, ts, text: `[s:${s}] tell me` }))).status).toBe(200);
  return { team, channel, ts, conversation: conversationOf(team, channel, ts) };
}

const REPLY = "Streaming works: this answer arrives a few words at a time, and ends here.";

describe("a reply streamed into a Slack thread", () => {
  // Acceptance 1 (the streaming half).
  it("is started, appended to in order and stopped: one reply message, holding the whole reply", async () => {
    const s = unique("stream");
    await script(s, [slowly(REPLY, 6, 150)]);
    const { channel, ts, team } = await ask(s);
    await statusFinal(channel, "Done.");
    const calls = await slackCalls(channel);
    const start = calls.find((c) => c.method === "chat.startStream")!;
    expect(start.body).toMatchObject({ channel, thread_ts: ts, recipient_team_id: team, recipient_user_id: "UPERSON1" });
    const streamed = calls.filter((c) => c.method.endsWith("Stream"));
    expect(streamed.at(-1)!.method).toBe("chat.stopStream");
    expect(streamed.slice(1, -1).every((c) => c.method === "chat.appendStream")).toBe(true);
    expect(streamed.every((c) => c.body.ts === undefined || c.body.ts === start.ts)).toBe(true);
    // The pieces, in order, are the reply.
    expect(streamed.map((c) => (c.body as { markdown_text?: string }).markdown_text ?? "").join("")).toBe(REPLY);
    // The object's outbox finished that message rather than posting the reply again.
    expect(calls.filter((c) => c.method === "chat.postMessage" && !c.body.blocks)).toEqual([]);
    expect(await replies(channel)).toMatchObject([{ ts: start.ts, text: REPLY, streaming: false }]);
  });

  it("in a DM's own view (no thread) is streamed there: one message, holding the whole reply", async () => {
    const s = unique("dm");
    await script(s, [slowly(REPLY, 6, 150)]);
    const [team, dm] = [slackId("T"), slackId("D")];
    await postEvent(messageEnvelope({ team, channel: dm, ts: newTs(), text: `[s:${s}] tell me`, mention: false, event: { channel_type: "im" } }));
    await statusFinal(dm, "Done.");
    const [start] = await slackCalls(dm, "chat.startStream");
    expect(start!.body.thread_ts).toBeUndefined();
    expect(await replies(dm)).toMatchObject([{ ts: start!.ts, text: REPLY, streaming: false }]);
  });

  it("is not streamed when it comes within a second: posted once, as before", async () => {
    const { channel } = await ask(unique("quick"));
    await statusFinal(channel, "Done.");
    expect((await slackCalls(channel)).filter((c) => c.method.endsWith("Stream"))).toEqual([]);
    expect((await replies(channel)).map((m) => m.text)).toHaveLength(1);
  });

  // Acceptance 2.
  it("in a workspace that refuses chat.startStream is one message, edited at most once a second, ending with the whole reply", async () => {
    const s = unique("edited");
    await script(s, [slowly(REPLY, 4, 200)]);
    const { channel } = await ask(s, { refuse: true });
    await statusFinal(channel, "Done.");
    const calls = await slackCalls(channel);
    expect(calls.filter((c) => c.method === "chat.startStream")).toHaveLength(1);
    const [message] = await replies(channel);
    expect(await replies(channel)).toHaveLength(1);
    expect(message!.text).toBe(REPLY);
    const edits = calls.filter((c) => !c.body.blocks && (c.ts === message!.ts || c.body.ts === message!.ts));
    expect(edits[0]!.method).toBe("chat.postMessage");
    expect(edits.length).toBeGreaterThan(2);
    expect(edits.slice(1).every((c) => c.method === "chat.update")).toBe(true);
    // By the fake's own clock: never two edits within a second.
    for (let i = 1; i < edits.length; i++) expect(edits[i]!.at - edits[i - 1]!.at).toBeGreaterThanOrEqual(1000);
    expect(edits.at(-1)!.body.markdown_text).toBe(REPLY);
  });

  // Acceptance 3.
  it("whose courier is cut short mid-stream ends as one message holding the whole reply, not two", async () => {
    const s = unique("cut");
    await script(s, [slowly(REPLY, 3, 150)]);
    const { team, channel, conversation } = await ask(s);
    await waitFor("the stream to be opened and appended to", async () => (await slackCalls(channel, "chat.appendStream")).length > 0);
    await evictCourier(courier(team, AGENT, "model", conversation));
    // Its watchdog alarm resumes the job: the model is asked again, and the re-run finds the message the first run opened.
    expect(await runDurableObjectAlarm(courier(team, AGENT, "model", conversation))).toBe(true);
    await statusFinal(channel, "Done.");
    expect((await providerRequests(s)).length).toBe(2);
    const calls = await slackCalls(channel);
    expect(calls.filter((c) => c.method === "chat.startStream")).toHaveLength(1);
    expect(calls.filter((c) => c.method === "chat.postMessage" && !c.body.blocks)).toEqual([]);
    expect(await replies(channel)).toMatchObject([{ text: REPLY, streaming: false }]);
  });

  it("of a turn stopped mid-stream is completed as it stands, not left streaming", async () => {
    const s = unique("stopped");
    await script(s, [slowly(REPLY, 3, 150)]);
    const { team, channel, ts } = await ask(s);
    await waitFor("the stream to be opened", async () => (await slackCalls(channel, "chat.startStream")).length > 0);
    const res = await postCommand({ team_id: team, channel_id: channel, user_id: "UPERSON1", command: "/agent", text: "stop", trigger_id: unique("trig") });
    expect(await res.json()).toMatchObject({ text: "Stopped 1 running turn in this channel." });
    await statusFinal(channel, "Stopped.");
    // The courier reads the provider to its end and reports; the job is discarded, and its message finished.
    const [message] = await waitFor("the streamed message to be stopped", async () => {
      const list = await replies(channel);
      return list.some((m) => m.streaming === false && m.thread_ts === ts && m.text !== "The turn was stopped.") && list;
    });
    expect(REPLY.startsWith(message!.text)).toBe(true);
    expect((await replies(channel)).map((m) => m.text)).toEqual([message!.text, "The turn was stopped."]);
  });

  it("in a turn with tool calls streams each call's text: what came before the tool call is finished as its own message, the answer as another", async () => {
    const s = unique("tools");
    const before = "Let me look at the clock before I answer you.";
    await script(s, [{ ...slowly(before, 5, 150), toolCalls: [{ name: "clock__now", arguments: {} }] }, slowly(REPLY, 6, 150)]);
    const { channel } = await ask(s);
    await statusFinal(channel, "Done.");
    const calls = await slackCalls(channel);
    expect(calls.filter((c) => c.method === "chat.startStream")).toHaveLength(2);
    expect(calls.filter((c) => c.method === "chat.stopStream")).toHaveLength(2);
    expect(calls.filter((c) => c.method === "chat.postMessage" && !c.body.blocks)).toEqual([]);
    expect((await replies(channel)).map((m) => [m.text, m.streaming])).toEqual([
      [before, false],
      [REPLY, false],
    ]);
  });

  it("is switched off by STREAM_REPLIES=false (and a value that is not a boolean fails the turn, naming it)", async () => {
    // The Worker's env is one object in this file's isolate, shared by every agent's object: set for this test only.
    const env = await runInDurableObject(agent(slackId("T"), AGENT), (instance) => (instance as unknown as { env: Record<string, string | undefined> }).env);
    const before = env.STREAM_REPLIES;
    try {
      for (const [value, expected] of [["false", "posted"], ["maybe", "failed"]] as const) {
        env.STREAM_REPLIES = value;
        const s = unique("off");
        await script(s, [slowly(REPLY, 6, 150)]);
        const { team, channel, conversation } = await ask(s);
        if (expected === "posted") {
          await statusFinal(channel, "Done.");
          expect((await slackCalls(channel)).filter((c) => c.method.endsWith("Stream"))).toEqual([]);
          expect((await replies(channel)).map((m) => m.text)).toEqual([REPLY]);
        } else {
          await statusFinal(channel, "Failed.");
          expect((await settled(team, AGENT, conversation)).error).toMatch(/^configuration error: STREAM_REPLIES is not valid JSON/);
        }
      }
    } finally {
      env.STREAM_REPLIES = before;
    }
  });

  it("longer than a Slack message: the first part finishes the streamed message, the rest follow as new ones", async () => {
    const s = unique("split");
    const paragraph = (n: number) => `Paragraph ${n}: ${"words that go on ".repeat(30).trim()}.`;
    const long = Array.from({ length: 16 }, (_, i) => paragraph(i + 1)).join("\n\n");
    expect(long.length).toBeGreaterThan(6000);
    await script(s, [slowly(long, 400, 150)]);
    const { channel } = await ask(s);
    await statusFinal(channel, "Done.");
    const parts = splitForSlack(long);
    expect(parts.length).toBeGreaterThan(1);
    const calls = await slackCalls(channel);
    expect(calls.filter((c) => c.method === "chat.startStream")).toHaveLength(1);
    expect((await replies(channel)).map((m) => m.text)).toEqual(parts); // one markdown path: streamed or posted, the same text
  });

  it("a finish sent again (its first answer lost) stops the stream once and still counts as done", async () => {
    const channel = slackId("C");
    const route = { tenant: slackId("T"), agent: AGENT };
    const address = { platform: "slack" as const, target: { channel, thread_ts: newTs() } };
    const opened = await slackOutbound.stream!(env as unknown as Env, route, { address, recipient: { platform: "slack", id: "UPERSON1" } }, "Half of", async () => {});
    expect(opened).toMatchObject({ ok: true, ref: expect.stringMatching(/^stream:/) });
    const finish = { route, conversation: "c", address, message: { kind: "reply" as const, text: "Half of it, then all." }, idempotencyKey: "k", createdAt: Date.now(), ref: (opened as { ref: string }).ref, shown: "Half of" };
    expect(await slackOutbound.deliver(env as unknown as Env, finish)).toEqual({ ok: true });
    expect(await slackOutbound.deliver(env as unknown as Env, { ...finish, uncertain: true })).toEqual({ ok: true });
    expect(await replies(channel)).toMatchObject([{ text: "Half of it, then all.", streaming: false }]);
  });

  // Acceptance 4.
  it("does not call the object per chunk: a 2,000-token answer costs the object the calls a short one does", async () => {
    const [long, short] = [unique("long"), unique("short")];
    await script(long, [slowly("ab ".repeat(1000).trim(), 1, 1)]);
    // Three pieces 1 s apart: its text comes for 2 s, well past the second after which a reply is streamed (at 500 ms apart it
    // came for 1 s, right at that line, and a busy machine could tip it into a reply posted whole).
    await script(short, [slowly("A short answer.", 5, 1000)]);
    const a = await ask(long);
    const b = await ask(short);
    // 2,000 pieces take a few seconds to read, longer on a busy machine: a longer wait than statusFinal's.
    for (const { channel } of [a, b]) {
      await waitFor(`status "Done." in ${channel}`, async () => (await slackCalls(channel)).some((c) => c.body.blocks && c.body.text?.endsWith("Done.")), 45_000);
    }
    // Both were streamed: the long one's 2,000 pieces in a few appends, a second apart.
    expect((await slackCalls(a.channel, "chat.appendStream")).length).toBeGreaterThan(1);
    expect((await slackCalls(b.channel, "chat.startStream")).length).toBe(1);
    const busy = async (o: { team: string; conversation: string }) => ((await settled(o.team, AGENT, o.conversation)) as unknown as { busyByTurn: { handlers: number; busyMs: number }[] }).busyByTurn[0]!;
    const [longTurn, shortTurn] = [await busy(a), await busy(b)];
    // The same calls (a model claim, one report of the opened message, the result, the outbox's rows); two
    // passes may fall together in one turn and not the other, hence the margin. Per chunk, it would be thousands.
    expect(Math.abs(longTurn.handlers - shortTurn.handlers)).toBeLessThanOrEqual(2);
  }, 60_000);
});

// Streamed Slack replies when Slack pushes back (issue 23): a stream Slack
// ended (after some appends, or idle past its limit while the model thinks)
// rolls the rest onto a new stream as it is written, never dropped, also when
// the roll's answer was lost (issue 40); a workspace's refusal
// of streaming is remembered for a while; a broadcast the model writes pings
// nobody whether the reply was streamed or posted whole; an organisation's
// install streams in channels too (the recipient's own workspace named); a
// stream whose opening answer was lost is found again, not made twice; a
// stream whose connection Slack closes mid-append and mid-stop is whole (what
// workerd logs of it is held to scripts/vitest.mjs: nothing uncaught).
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { runDurableObjectAlarm } from "cloudflare:test";
import { putTenantRecord, tenantRecord } from "../../../runtime/index.ts";
import { courier, evictCourier } from "../../agents.ts";
import { releaseProvider, script, unique, waitFor } from "../../support.ts";
import { AGENT, conversationOf, messageEnvelope, newTs, postEvent, slackCalls, slackId, statusFinal } from "./helpers.ts";

const FAKE_SLACK_URL = (env as unknown as Record<string, string>).FAKE_SLACK_URL!;

interface FakeMessage {
  ts: string;
  thread_ts?: string;
  text: string;
  blocks?: unknown[];
  streaming?: boolean;
  pinged?: boolean;
}

async function replies(channel: string): Promise<FakeMessage[]> {
  const all: FakeMessage[] = await (await fetch(`${FAKE_SLACK_URL}/_control/messages?${new URLSearchParams({ channel })}`)).json();
  return all.filter((m) => !m.blocks);
}

const control = (path: string, body: unknown) => fetch(`${FAKE_SLACK_URL}/_control/${path}`, { method: "POST", body: JSON.stringify(body) });

const slowly = (text: string, size: number, delayMs: number) => ({ text, argumentChunk: size, chunkDelayMs: delayMs });

async function ask(s: string, o: { team?: string; channel?: string; envelope?: (e: Record<string, unknown>) => void } = {}) {
  const team = o.team ?? slackId("T");
  const channel = o.channel ?? slackId("C");
  const ts = newTs();
  const envelope = messageEnvelope({ team, channel, ts, text: `[s:${s}] tell me` });
  o.envelope?.(envelope);
  expect((await postEvent(envelope)).status).toBe(200);
  return { team, channel, ts, conversation: conversationOf(team, channel, ts) };
}

const REPLY = "Streaming works: this answer arrives a few words at a time, and it goes on for a while longer, and ends here.";

describe("a streamed Slack reply when Slack pushes back", () => {
  it("whose stream Slack expires after 2 appends is whole in the thread, once: the rest rolled onto new streams as it is written", async () => {
    const s = unique("expire");
    await script(s, [slowly(REPLY, 3, 150)]);
    const channel = slackId("C");
    await control("expire-streams", { channel, afterAppends: 2 });
    const { ts } = await ask(s, { channel });
    await statusFinal(channel, "Done.");
    const messages = await replies(channel);
    expect(messages.length).toBeGreaterThanOrEqual(2);
    expect(messages.every((m) => m.thread_ts === ts && !m.streaming)).toBe(true);
    expect(messages.map((m) => m.text).join("")).toBe(REPLY);
    // Each message after the first is a stream of its own, opened while the model still wrote: nothing waited for the end.
    expect(await slackCalls(channel, "chat.startStream")).toHaveLength(messages.length);
    expect((await slackCalls(channel, "chat.postMessage")).filter((c) => !c.body.blocks)).toEqual([]);
  });

  it("whose model stops writing for longer than Slack's stream idle limit rolls the rest onto a new stream: the whole reply in the thread, once", async () => {
    const s = unique("idle");
    // Six pieces, then the model thinks (held) past the stream's idle limit, then writes the rest.
    await script(s, [{ ...slowly(REPLY, 6, 150), holdAfter: 6 }]);
    const channel = slackId("C");
    await control("limits", { channel, streamIdleMs: 1_500 });
    const { ts } = await ask(s, { channel });
    await waitFor("the stream to be opened", async () => (await slackCalls(channel, "chat.startStream")).length > 0);
    await new Promise((resolve) => setTimeout(resolve, 2_500));
    await releaseProvider(s);
    await statusFinal(channel, "Done.");
    const messages = await replies(channel);
    expect(messages.map((m) => m.text)).toEqual([REPLY.slice(0, 36), REPLY.slice(36)]);
    expect(messages.every((m) => m.thread_ts === ts && !m.streaming)).toBe(true);
    // The first stream idled out in the fake as in Slack; the rest came as a second stream, and nothing was posted whole.
    expect((messages[0] as FakeMessage & { expired?: boolean }).expired).toBe(true);
    expect(await slackCalls(channel, "chat.startStream")).toHaveLength(2);
    expect((await slackCalls(channel, "chat.postMessage")).filter((c) => !c.body.blocks)).toEqual([]);
  });

  it("whose roll onto a new stream lost its answer (the courier died waiting) shows the reply once: the re-run finds that message", async () => {
    const s = unique("lost-roll");
    await script(s, [{ ...slowly(REPLY, 6, 150), holdAfter: 6 }]);
    const channel = slackId("C");
    await control("limits", { channel, streamIdleMs: 1_500 });
    // The second stream (the roll's) is made, and its answer never comes.
    expect(REPLY.indexOf(REPLY.slice(36, 42))).toBe(36);
    await control("hold", { method: "chat.startStream", channel, textIncludes: REPLY.slice(36, 42) });
    const { team, conversation } = await ask(s, { channel });
    await waitFor("the stream to be opened", async () => (await slackCalls(channel, "chat.startStream")).length > 0);
    await new Promise((resolve) => setTimeout(resolve, 2_500));
    await releaseProvider(s);
    await waitFor("the roll to be asked for", async () => (await slackCalls(channel, "chat.startStream")).length === 2);
    await evictCourier(courier(team, AGENT, "model", conversation));
    // Its watchdog alarm resumes the job: the model is asked again (and held again, then let go).
    await releaseProvider(s);
    expect(await runDurableObjectAlarm(courier(team, AGENT, "model", conversation))).toBe(true);
    await statusFinal(channel, "Done.");
    // The re-run's reply starts again in the first message; the message the lost roll made is found and removed, not left beside it.
    expect(await slackCalls(channel, "chat.delete")).toHaveLength(1);
    expect((await replies(channel)).map((m) => m.text)).toEqual([REPLY]);
  });

  it("in a workspace that refused streaming is posted without asking again, until the refusal is old", async () => {
    const team = slackId("T");
    const first = slackId("C");
    await control("refuse-streaming", { channel: first });
    const a = unique("r1");
    await script(a, [slowly(REPLY, 6, 150)]);
    await ask(a, { team, channel: first });
    await statusFinal(first, "Done.");
    expect(await slackCalls(first, "chat.startStream")).toHaveLength(1);
    // Another thread of the same workspace: the refusal is remembered.
    const b = unique("r2");
    await script(b, [slowly(REPLY, 6, 150)]);
    const second = slackId("C");
    await ask(b, { team, channel: second });
    await statusFinal(second, "Done.");
    expect(await slackCalls(second, "chat.startStream")).toHaveLength(0);
    expect((await replies(second)).map((m) => m.text)).toEqual([REPLY]);
    // An hour later (the remembered refusal aged), streaming is tried again.
    const stored = (await tenantRecord(env, team, "slack-stream-refusals")) as { until: number };
    await putTenantRecord(env, team, "slack-stream-refusals", { ...stored, until: Date.now() - 1 });
    const c = unique("r3");
    await script(c, [slowly(REPLY, 6, 150)]);
    const third = slackId("C");
    await ask(c, { team, channel: third });
    await statusFinal(third, "Done.");
    expect(await slackCalls(third, "chat.startStream")).toHaveLength(1);
    expect((await replies(third)).map((m) => m.text)).toEqual([REPLY]);
  });

  it("with <!channel>, <!here> and <!everyone> in it pings nobody, streamed or posted whole, and reads the same both ways", async () => {
    const broadcast = "Dear <!channel>, <!here> and <!everyone>: nothing to see, <!subteam^S123|team> included. That is all for now.";
    const [streamed, posted] = [unique("bc-stream"), unique("bc-post")];
    await script(streamed, [slowly(broadcast, 4, 100)]);
    await script(posted, [{ text: broadcast }]);
    const a = await ask(streamed);
    const b = await ask(posted);
    await statusFinal(a.channel, "Done.");
    await statusFinal(b.channel, "Done.");
    expect(await slackCalls(a.channel, "chat.startStream")).toHaveLength(1);
    expect(await slackCalls(b.channel, "chat.startStream")).toHaveLength(0);
    const [one] = await replies(a.channel);
    const [two] = await replies(b.channel);
    expect(one!.pinged).toBeUndefined();
    expect(two!.pinged).toBeUndefined();
    expect(one!.text).toBe(two!.text);
    expect(one!.text).toContain("&lt;!channel>");
  });

  it("of an organisation's install (Enterprise Grid) streams in a channel, for the person's own workspace", async () => {
    const s = unique("grid");
    await script(s, [slowly(REPLY, 6, 150)]);
    const org = slackId("E");
    const team = slackId("T");
    const { channel } = await ask(s, {
      team,
      envelope: (e) => {
        e.team_id = team;
        e.enterprise_id = org;
        e.authorizations = [{ enterprise_id: org, team_id: null, user_id: "UFAKEBOT", is_bot: true, is_enterprise_install: true }];
        (e.event as Record<string, unknown>).team = team;
      },
    });
    await statusFinal(channel, "Done.");
    const [start] = await slackCalls(channel, "chat.startStream");
    expect(start!.body).toMatchObject({ recipient_team_id: team, recipient_user_id: "UPERSON1" });
    expect(await replies(channel)).toMatchObject([{ text: REPLY, streaming: false }]);
  });

  it("whose chat.startStream answer never came back (its courier died waiting) ends as one message, whole", async () => {
    const s = unique("lost-open");
    await script(s, [slowly(REPLY, 3, 150)]);
    const channel = slackId("C");
    await control("hold", { method: "chat.startStream", channel });
    const { team, conversation } = await ask(s, { channel });
    await waitFor("the stream to be asked for", async () => (await slackCalls(channel, "chat.startStream")).length > 0);
    await evictCourier(courier(team, AGENT, "model", conversation));
    // Its watchdog alarm resumes the job: the re-run finds the message the lost opening made and takes it over.
    expect(await runDurableObjectAlarm(courier(team, AGENT, "model", conversation))).toBe(true);
    await statusFinal(channel, "Done.");
    expect(await slackCalls(channel, "chat.startStream")).toHaveLength(1);
    expect(await replies(channel)).toMatchObject([{ text: REPLY, streaming: false }]);
  });

  it("whose connection Slack closes with no answer, once during an append and once during the stop, ends as one message, whole", async () => {
    const s = unique("dropped");
    await script(s, [slowly(REPLY, 3, 150)]);
    const channel = slackId("C");
    await control("drop", { method: "chat.appendStream", channel });
    await control("drop", { method: "chat.stopStream", channel });
    await ask(s, { channel });
    await statusFinal(channel, "Done.");
    const streamed = (await slackCalls(channel)).filter((c) => c.method.endsWith("Stream"));
    expect(streamed.filter((c) => c.dropped).map((c) => c.method)).toEqual(["chat.appendStream", "chat.stopStream"]);
    // The pieces Slack took are the reply: the next append carried the dropped one's, and the stop was made again.
    const made = streamed.filter((c) => !c.dropped);
    expect(made.map((c) => c.body.markdown_text ?? "").join("")).toBe(REPLY);
    expect(made.at(-1)!.method).toBe("chat.stopStream");
    expect(await replies(channel)).toMatchObject([{ text: REPLY, streaming: false }]);
  });
});

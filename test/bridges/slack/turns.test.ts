// A turn's life in a thread: the status message with its Stop button, steering,
// stopping from the button and from `/agent stop`, and a failed turn (acceptance 5).
import { describe, expect, it } from "vitest";
import { getConversation, providerRequests, releaseProvider, script, settled, unique, waitFor } from "../../support.ts";
import { auditOnceAppended } from "../../agents.ts";
import channelFixture from "../../fixtures/slack/channel-slack.json";
import {
  AGENT,
  conversationOf,
  messageEnvelope,
  newTs,
  postCommand,
  postEvent,
  postInteraction,
  responsesTo,
  responseUrl,
  slackCalls,
  slackId,
  statusFinal,
  threadMessages,
  type SlackCall,
} from "./helpers.ts";

/** The turn's status message as first posted, once it is. */
function statusPost(channel: string, threadTs: string): Promise<SlackCall> {
  return waitFor(`status message in ${channel}`, async () =>
    (await slackCalls(channel, "chat.postMessage")).find((c) => c.body.blocks && c.body.thread_ts === threadTs && c.ts),
  );
}

function stopButton(call: SlackCall) {
  return call.body.blocks?.flatMap((b) => b.elements ?? []).find((e) => e.action_id === "antiproton_stop");
}

/** The recorded block_actions payload, as a click on `value` under `action_id` in this team, channel and thread. */
function click(o: { team: string; channel: string; threadTs: string; messageTs: string; actionId: string; value: string; responseId: string; actionTs?: string }) {
  const recorded = channelFixture.channel_post_action;
  return {
    ...recorded,
    user: { ...recorded.user, team_id: o.team },
    team: { ...recorded.team, id: o.team },
    channel: { ...recorded.channel, id: o.channel },
    container: { ...recorded.container, channel_id: o.channel, thread_ts: o.threadTs, message_ts: o.messageTs },
    message: { ...recorded.message, ts: o.messageTs, thread_ts: o.threadTs },
    response_url: responseUrl(o.responseId),
    actions: [{ action_id: o.actionId, block_id: "b1", type: "button", value: o.value, action_ts: o.actionTs ?? newTs() }],
  };
}

describe("a turn in a Slack thread", () => {
  it("shows a status message with a Stop button while it runs and finalises it without one", async () => {
    const team = slackId("T");
    const channel = slackId("C");
    const ts = newTs();
    await postEvent(messageEnvelope({ team, channel, ts, text: "**status** please" }));
    const posted = await statusPost(channel, ts);
    expect(JSON.parse(stopButton(posted)!.value!)).toEqual({ t: team, a: AGENT, c: conversationOf(team, channel, ts) });
    const done = await statusFinal(channel, "Done.");
    expect(done.method).toBe("chat.update");
    expect(done.body.ts).toBe(posted.ts);
    expect(stopButton(done)).toBeUndefined();
    // One status message per turn, posted once and updated in place.
    expect((await slackCalls(channel, "chat.postMessage")).filter((c) => c.body.blocks)).toHaveLength(1);
    // The model's Markdown arrives as Slack's Markdown (markdown_text), as a streamed reply does.
    expect((await threadMessages(channel)).map((m) => m.body.markdown_text)).toEqual(["ok: **status** please"]);
  });

  // Issue 40, acceptance 2: the Chat SDK makes one call a turn; the status message and a reply of its own made three.
  it("a plain turn makes two Slack calls: its status message posted, then edited into the answer", async () => {
    const team = slackId("T");
    const channel = slackId("C");
    const ts = newTs();
    await postEvent(messageEnvelope({ team, channel, ts, text: "just one answer" }));
    const posted = await statusPost(channel, ts);
    await statusFinal(channel, "Done.");
    await settled(team, AGENT, conversationOf(team, channel, ts));
    // Nothing more follows the answer (no final "Done." state after it).
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    const calls = await slackCalls(channel);
    expect(calls.map((c) => c.method)).toEqual(["chat.postMessage", "chat.update"]);
    expect(calls[1]!.body).toMatchObject({ ts: posted.ts, markdown_text: "ok: just one answer" });
    // The edit has no blocks: the Stop button goes with the working state.
    expect(calls[1]!.body.blocks).toBeUndefined();
    expect((await threadMessages(channel)).map((m) => [m.body.markdown_text, m.body.thread_ts])).toEqual([["ok: just one answer", ts]]);
  });

  // Acceptance 5: steer
  it("a message in the thread while its turn runs is a steer that reaches the model before its next call", async () => {
    const s = unique("steer");
    await script(s, [{ hold: true, text: "first draft" }, { text: "final, with the steer" }]);
    const team = slackId("T");
    const channel = slackId("C");
    const ts = newTs();
    try {
      await postEvent(messageEnvelope({ team, channel, ts, text: `[s:${s}] write a summary` }));
      await waitFor("the first model call", async () => (await providerRequests(s)).length === 1);
      expect((await postEvent(messageEnvelope({ team, channel, ts: newTs(), thread_ts: ts, text: "make it short" }))).status).toBe(200);
    } finally {
      await releaseProvider(s);
    }
    await statusFinal(channel, "Done.");
    const requests = await providerRequests(s);
    expect(requests).toHaveLength(2);
    const secondCallUsers = requests[1]!.body.messages.filter((m) => m.role === "user").map((m) => JSON.stringify(m.content));
    expect(secondCallUsers.at(-1)).toContain("make it short");
    const view = await getConversation(team, AGENT, conversationOf(team, channel, ts));
    expect(view.transcript.find((e) => e.text === "make it short")?.steer).toBe(true);
    expect((await threadMessages(channel)).map((m) => m.body.markdown_text)).toEqual(["final, with the steer"]);
    // It reads below the steer: a message of its own, not the status message above the steer edited into it.
    expect((await slackCalls(channel, "chat.postMessage")).some((c) => c.body.markdown_text === "final, with the steer")).toBe(true);
  });

  // Acceptance 5: the Stop button
  it("the Stop button interrupts the turn and the thread is told", async () => {
    const s = unique("stopbtn");
    await script(s, [{ hold: true, text: "too late" }]);
    const team = slackId("T");
    const channel = slackId("C");
    const ts = newTs();
    const responseId = unique("resp");
    try {
      await postEvent(messageEnvelope({ team, channel, ts, text: `[s:${s}] a long job` }));
      const status = await statusPost(channel, ts);
      await waitFor("the model call", async () => (await providerRequests(s)).length === 1);
      const stop = click({ team, channel, threadTs: ts, messageTs: status.ts!, actionId: "antiproton_stop", value: stopButton(status)!.value!, responseId });
      const res = await postInteraction(stop);
      expect(res.status).toBe(200);
      // Slack sends the same click again: one stop, one row of the trail.
      expect((await postInteraction(stop)).status).toBe(200);
      const stopped = await statusFinal(channel, "Stopped.");
      expect(stopped.body.ts).toBe(status.ts);
      expect(stopButton(stopped)).toBeUndefined();
      const view = await settled(team, AGENT, conversationOf(team, channel, ts));
      expect(view.status).toBe("idle");
      await expect.poll(async () => (await threadMessages(channel)).map((m) => [m.body.markdown_text, m.body.thread_ts]), { timeout: 15_000 }).toEqual([["The turn was stopped.", ts]]);
      await expect.poll(() => responsesTo(responseId), { timeout: 15_000 }).toEqual([{ response_type: "ephemeral", replace_original: false, text: "Stopped the running turn." }]);
      expect((await auditOnceAppended(team, AGENT)).map((row) => [row.actor, row.action, row.subject])).toEqual([
        [`slack:${team}:${stop.user.id}`, "conversation.stop", `agents/${AGENT}/conversations/${conversationOf(team, channel, ts)}`],
      ]);
    } finally {
      await releaseProvider(s);
    }
  });

  it("a Stop button naming another workspace is refused", async () => {
    const team = slackId("T");
    const channel = slackId("C");
    const ts = newTs();
    const value = JSON.stringify({ t: slackId("T"), a: AGENT, c: conversationOf(team, channel, ts) });
    const res = await postInteraction(click({ team, channel, threadTs: ts, messageTs: ts, actionId: "antiproton_stop", value, responseId: unique("resp") }));
    expect(res.status).toBe(400);
  });

  // Acceptance 5: /agent stop
  it("`/agent stop` in a channel interrupts that channel's running turns, and only those", async () => {
    const s = unique("stopcmd");
    const other = unique("stopother");
    await script(s, [{ hold: true, text: "too late" }]);
    await script(other, [{ hold: true, text: "other done" }]);
    const team = slackId("T");
    const channel = slackId("C");
    const elsewhere = slackId("C");
    const threads = [newTs(), newTs()];
    const otherTs = newTs();
    try {
      for (const ts of threads) await postEvent(messageEnvelope({ team, channel, ts, text: `[s:${s}] job ${ts}` }));
      await postEvent(messageEnvelope({ team, channel: elsewhere, ts: otherTs, text: `[s:${other}] other job` }));
      for (const ts of threads) await statusPost(channel, ts);
      await statusPost(elsewhere, otherTs);

      const res = await postCommand({ team_id: team, team_domain: "acme", channel_id: channel, channel_name: "general", user_id: "UPERSON1", command: "/agent", text: "stop", trigger_id: unique("trig"), response_url: responseUrl(unique("resp")) });
      expect(res.status).toBe(200);
      expect(await res.json()).toEqual({ response_type: "ephemeral", text: "Stopped 2 running turns in this channel." });
      for (const ts of threads) expect((await settled(team, AGENT, conversationOf(team, channel, ts))).status).toBe("idle");
      await expect.poll(async () => (await threadMessages(channel)).map((m) => [m.body.markdown_text, m.body.thread_ts]).sort(), { timeout: 15_000 }).toEqual(
        threads.map((ts) => ["The turn was stopped.", ts]).sort(),
      );
      expect((await getConversation(team, AGENT, conversationOf(team, elsewhere, otherTs))).status).not.toBe("idle");

      const again = await postCommand({ team_id: team, channel_id: channel, user_id: "UPERSON1", command: "/agent", text: "stop", trigger_id: unique("trig") });
      expect(await again.json()).toEqual({ response_type: "ephemeral", text: "Nothing is running in this channel." });
      // Each stopped turn is one row of the trail, by the person who typed the command; the second command stopped nothing.
      const rows = await auditOnceAppended(team, AGENT);
      expect(rows.map((row) => [row.actor, row.action, row.subject]).sort()).toEqual(
        threads.map((ts) => [`slack:${team}:UPERSON1`, "conversation.stop", `agents/${AGENT}/conversations/${conversationOf(team, channel, ts)}`]).sort(),
      );
    } finally {
      // Held calls block the queue consumer; a release sent before its call arrives is lost, so release until the last one is through.
      await waitFor("the other channel's turn to finish", async () => {
        await releaseProvider(s);
        await releaseProvider(other);
        return (await getConversation(team, AGENT, conversationOf(team, elsewhere, otherTs))).status === "idle";
      });
    }
  });

  it("a failed turn tells the person why in the thread", async () => {
    const s = unique("fail");
    await script(s, [{ status: 400, error: "context too large for this model" }]);
    const team = slackId("T");
    const channel = slackId("C");
    const ts = newTs();
    await postEvent(messageEnvelope({ team, channel, ts, text: `[s:${s}] this will fail` }));
    await statusFinal(channel, "Failed.");
    await expect.poll(async () => (await threadMessages(channel)).map((m) => m.body.markdown_text), { timeout: 15_000 }).toEqual([
      expect.stringMatching(/^Sorry, this turn failed: .*context too large for this model/),
    ]);
  });

  it("paces a busy turn's status updates: at least 1 s apart by Slack's own clock, coalesced, ending with the answer in its place", async () => {
    const team = slackId("T");
    const channel = slackId("C");
    const ts = newTs();
    const s = unique("busy");
    // Eight tool rounds in quick succession (over about 2.4 s), each a status change ("… using `clock__now`"), then the answer.
    await script(s, [...Array.from({ length: 8 }, () => ({ delayMs: 300, toolCalls: [{ name: "clock__now", arguments: {} }] })), { text: "It is late." }]);
    await postEvent(messageEnvelope({ team, channel, ts, text: `what time is it? [s:${s}]` }));
    const done = await statusFinal(channel, "Done.");
    expect(await providerRequests(s)).toHaveLength(9);

    const calls = (await slackCalls(channel)).filter((c) => !c.limited);
    const changes = calls.filter((c) => c.body.blocks);
    // The answer is the status message's last change (it never waits out the second: it is what the person waits for).
    expect(calls.at(-1)).toEqual(done);
    expect(done.body).toMatchObject({ ts: changes[0]!.ts, markdown_text: "It is late." });
    expect(changes.slice(1).every((c) => c.method === "chat.update")).toBe(true);
    expect(changes.some((c) => c.body.text?.includes("using `clock__now`"))).toBe(true);
    // Eight states, coalesced: fewer updates than states.
    expect(changes.length - 1).toBeLessThan(8);
    const gaps = changes.slice(1).map((c, i) => c.at - changes[i]!.at);
    expect(Math.min(...gaps)).toBeGreaterThanOrEqual(1000);
  });
});

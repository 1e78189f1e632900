// Events API: verification, filtering, dedupe and the reply in the thread
// (acceptance points 1-4), replaying recorded Slack webhooks.
import { describe, expect, it } from "vitest";
import { verifySlackSignature } from "../../../bridges/slack/verify.ts";
import { agentExists } from "../../agents.ts";
import { getConversation, providerRequests, releaseProvider, script, settled, unique, waitFor, worker } from "../../support.ts";
import recorded from "../../fixtures/slack/slack.json";
import streaming from "../../fixtures/slack/streaming-slack.json";
import {
  AGENT,
  conversationOf,
  messageEnvelope,
  newTs,
  nowSeconds,
  postEvent,
  replay,
  slackCalls,
  slackId,
  slackSignature,
  statusFinal,
  threadMessages,
} from "./helpers.ts";

const TEAM = "T00FAKE00AA"; // the recorded fixtures' workspace

describe("Slack signature (v0)", () => {
  it("accepts Slack's published test vector and rejects a changed body", async () => {
    const secret = "8f742231b10e8888abcd99yyyzzz85a5";
    const body =
      "token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c";
    const signature = "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503";
    expect(await verifySlackSignature(secret, "1531420618", body, signature)).toBe(true);
    expect(await verifySlackSignature(secret, "1531420618", `${body}x`, signature)).toBe(false);
    expect(await verifySlackSignature(secret, "1531420619", body, signature)).toBe(false);
  });
});

describe("POST /slack/events", () => {
  it("answers url_verification with the challenge", async () => {
    const res = await postEvent({ token: "t", challenge: "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P", type: "url_verification" });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ challenge: "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P" });
  });

  // Acceptance 1
  it("a recorded message event → 200 at once → one reply in the same thread", async () => {
    const channel = slackId("C");
    const envelope = replay(recorded.mention, { channel });
    const res = await postEvent(envelope);
    expect(res.status).toBe(200);
    const ts = recorded.mention.event.ts;
    await statusFinal(channel, "Done.");
    const replies = await threadMessages(channel);
    // The bot's own mention is stripped before the model sees the text.
    expect(replies.map((r) => [r.body.markdown_text, r.body.thread_ts])).toEqual([["ok: Hey", ts]]);
    expect(replies[0]!.token).toBe("xoxb-fake-single-workspace-token");
    const view = await getConversation(TEAM, AGENT, conversationOf(TEAM, channel, ts));
    expect(view.transcript.map((e) => [e.role, e.text])).toEqual([["user", "Hey"], ["assistant", "ok: Hey"]]);
  });

  it("acks once the event is accepted, without waiting for the model", async () => {
    const s = unique("ack");
    await script(s, [{ hold: true, text: "answered later" }]);
    const channel = slackId("C");
    try {
      const res = await postEvent(replay(recorded.mention, { channel, event: { text: `<@U00FAKEBOT01> [s:${s}] Hey` } }));
      expect(res.status).toBe(200);
      await waitFor("the model call", async () => (await providerRequests(s)).length === 1);
      expect(await threadMessages(channel)).toEqual([]);
    } finally {
      await releaseProvider(s);
    }
    await statusFinal(channel, "Done.");
    expect((await threadMessages(channel)).map((r) => r.body.markdown_text)).toEqual(["answered later"]);
  });

  it("a recorded follow-up in a thread continues that thread's conversation", async () => {
    const channel = slackId("C");
    await postEvent(replay(recorded.mention, { channel }));
    await statusFinal(channel, "Done.");
    await postEvent(replay(recorded.followUp, { channel }));
    const conversation = conversationOf(TEAM, channel, recorded.mention.event.ts);
    const view = await settled(TEAM, AGENT, conversation);
    expect(view.transcript.filter((e) => e.role === "user").map((e) => e.text)).toEqual(["Hey", "Hi"]);
    await expect.poll(async () => (await threadMessages(channel)).map((r) => [r.body.markdown_text, r.body.thread_ts]), { timeout: 15_000 }).toEqual([
      ["ok: Hey", recorded.mention.event.ts],
      ["ok: Hi", recorded.mention.event.ts],
    ]);
  });

  // Acceptance 2
  it("retries (X-Slack-Retry-Num 1..3), the app_mention + message pair and re-sent duplicates make one message and one reply", async () => {
    const team = slackId("T");
    const channel = slackId("C");
    const ts = newTs();
    const message = messageEnvelope({ team, channel, ts, text: "once please", event_id: "Ev1" });
    const mention = messageEnvelope({ team, channel, ts, text: "once please", event_id: "Ev2", type: "app_mention" });
    const resent = messageEnvelope({ team, channel, ts, text: "once please", event_id: "Ev3" });
    expect((await postEvent(message)).status).toBe(200);
    for (const retry of [1, 2, 3]) {
      const res = await postEvent(message, { "x-slack-retry-num": String(retry), "x-slack-retry-reason": "http_timeout" });
      expect(res.status).toBe(200);
    }
    expect((await postEvent(mention)).status).toBe(200);
    expect((await postEvent(resent)).status).toBe(200);
    await statusFinal(channel, "Done.");
    const view = await getConversation(team, AGENT, conversationOf(team, channel, ts));
    expect(view.transcript.filter((e) => e.role === "user").map((e) => e.text)).toEqual(["once please"]);
    expect((await threadMessages(channel)).map((r) => r.body.markdown_text)).toEqual(["ok: once please"]);
  });

  // Acceptance 3
  it("bad signature, stale timestamp, missing headers → 401; malformed body → 400; wrong type 415; too large 413; none has an effect", async () => {
    const team = slackId("T");
    const channel = slackId("C");
    const ts = newTs();
    const body = JSON.stringify(messageEnvelope({ team, channel, ts, text: "let me in" }));
    const now = nowSeconds();
    const post = (headers: Record<string, string>, payload = body) => worker("/slack/events", { method: "POST", headers, body: payload });
    const json = { "content-type": "application/json" };

    const badSignature = await post({ ...json, "x-slack-request-timestamp": now, "x-slack-signature": await slackSignature(body, now, "not-the-secret") });
    const stale = String(Number(now) - 301);
    const staleRequest = await post({ ...json, "x-slack-request-timestamp": stale, "x-slack-signature": await slackSignature(body, stale) });
    const missingSignature = await post({ ...json, "x-slack-request-timestamp": now });
    const missingTimestamp = await post({ ...json, "x-slack-signature": await slackSignature(body, now) });
    for (const res of [badSignature, staleRequest, missingSignature, missingTimestamp]) {
      expect(res.status).toBe(401);
      expect(await res.json()).toHaveProperty("error");
    }

    const malformed = "{not json";
    const malformedRes = await post({ ...json, "x-slack-request-timestamp": now, "x-slack-signature": await slackSignature(malformed, now) }, malformed);
    expect(malformedRes.status).toBe(400);
    const wrongShape = JSON.stringify({ type: "event_callback", team_id: team, event: { type: "message", channel } });
    const wrongShapeRes = await post({ ...json, "x-slack-request-timestamp": now, "x-slack-signature": await slackSignature(wrongShape, now) }, wrongShape);
    expect(wrongShapeRes.status).toBe(400);
    const asText = await post({ "content-type": "text/plain", "x-slack-request-timestamp": now, "x-slack-signature": await slackSignature(body, now) });
    expect(asText.status).toBe(415);
    const huge = JSON.stringify({ ...JSON.parse(body), padding: "x".repeat(1 << 20) });
    const hugeRes = await post({ ...json, "x-slack-request-timestamp": now, "x-slack-signature": await slackSignature(huge, now) }, huge);
    expect(hugeRes.status).toBe(413);

    await expect(getConversation(team, AGENT, conversationOf(team, channel, ts))).rejects.toThrow(/404/);
    expect(await slackCalls(channel)).toEqual([]);
    // Nothing was recorded under this event's id: the genuine request still starts a turn.
    expect((await postEvent(JSON.parse(body))).status).toBe(200);
    await statusFinal(channel, "Done.");
    expect((await threadMessages(channel)).map((r) => r.body.markdown_text)).toEqual(["ok: let me in"]);
  });

  it("ids that are not Slack's, or do not make a conversation id → 400 naming them; nothing written", async () => {
    const team = slackId("T");
    const channel = slackId("C");
    const cases: [Record<string, unknown>, RegExp][] = [
      [{ ts: "1700000000.1\ud800", thread_ts: newTs() }, /ts/],
      [{ ts: newTs(), user: "U\ud800" }, /user/],
      [{ ts: newTs(), channel: "C1/../C2" }, /does not make a conversation id/],
    ];
    for (const [event, named] of cases) {
      const res = await postEvent(messageEnvelope({ team, channel, ts: newTs(), text: "hello", event }));
      expect(res.status).toBe(400);
      expect(((await res.json()) as { error: string }).error).toMatch(named);
    }
    expect(await agentExists(team, AGENT)).toBe(false);
    expect(await slackCalls(channel)).toEqual([]);
  });

  // Acceptance 4
  it("bot messages (recorded, with bot_id), the bot's own messages and message_changed start no turn", async () => {
    const team = slackId("T");
    const channel = slackId("C");
    const botMessage = replay(streaming.promptMessage, { team, channel });
    const own = messageEnvelope({ team, channel, ts: newTs(), text: "I am the bot", user: "UFAKEBOT" });
    const parentTs = newTs();
    const edited = messageEnvelope({
      team,
      channel,
      ts: newTs(),
      text: "",
      mention: false,
      event: { subtype: "message_changed", user: undefined, message: { type: "message", user: "UPERSON1", text: "edited text", ts: parentTs }, previous_message: { text: "old" } },
    });
    const joined = messageEnvelope({ team, channel, ts: newTs(), text: "<@UPERSON1> has joined the channel", mention: false, event: { subtype: "channel_join" } });
    for (const envelope of [botMessage, own, edited, joined]) expect((await postEvent(envelope)).status).toBe(200);

    // A person's message afterwards is answered, so the ignored ones had their chance to start a turn.
    const ts = newTs();
    await postEvent(messageEnvelope({ team, channel, ts, text: "a real question" }));
    await statusFinal(channel, "Done.");
    const conversations = await worker(`/v1/tenants/${team}/agents/${AGENT}/conversations/${conversationOf(team, channel, (botMessage.event as { thread_ts: string }).thread_ts)}`, {
      headers: { authorization: "Bearer test-admin-token" },
    });
    expect(conversations.status).toBe(404);
    await expect(getConversation(team, AGENT, conversationOf(team, channel, parentTs))).rejects.toThrow(/404/);
    expect((await threadMessages(channel)).map((r) => [r.body.markdown_text, r.body.thread_ts])).toEqual([["ok: a real question", ts]]);
  });

  it("in a channel it answers when mentioned and follows that thread; in a DM it answers everything", async () => {
    const team = slackId("T");
    const channel = slackId("C");
    const chatter = newTs();
    const otherThread = newTs();
    await postEvent(messageEnvelope({ team, channel, ts: chatter, text: "lunch anyone?", mention: false }));
    await postEvent(messageEnvelope({ team, channel, ts: newTs(), thread_ts: otherThread, text: "me!", mention: false }));
    const asked = newTs();
    await postEvent(messageEnvelope({ team, channel, ts: asked, text: "what is 2+2?" }));
    await statusFinal(channel, "Done.");
    await postEvent(messageEnvelope({ team, channel, ts: newTs(), thread_ts: asked, text: "and 3+3?" }));
    const view = await settled(team, AGENT, conversationOf(team, channel, asked));
    expect(view.transcript.filter((e) => e.role === "user").map((e) => e.text)).toEqual(["what is 2+2?", "and 3+3?"]);
    await expect(getConversation(team, AGENT, conversationOf(team, channel, chatter))).rejects.toThrow(/404/);
    await expect(getConversation(team, AGENT, conversationOf(team, channel, otherThread))).rejects.toThrow(/404/);

    const dm = slackId("D");
    const dmTs = newTs();
    await postEvent(messageEnvelope({ team, channel: dm, ts: dmTs, text: "hi in private", mention: false, event: { channel_type: "im" } }));
    await statusFinal(dm, "Done.");
    expect((await threadMessages(dm)).map((m) => m.body.markdown_text)).toEqual(["ok: hi in private"]);
  });

  it("keeps file_share and thread_broadcast messages from people", async () => {
    const team = slackId("T");
    const channel = slackId("C");
    const ts = newTs();
    await postEvent(messageEnvelope({ team, channel, ts, text: "look at this", event: { subtype: "file_share", files: [{ id: "F1", name: "graph.png" }] } }));
    await statusFinal(channel, "Done.");
    const broadcastTs = newTs();
    await postEvent(messageEnvelope({ team, channel, ts: broadcastTs, thread_ts: ts, text: "and this", event: { subtype: "thread_broadcast" } }));
    const view = await settled(team, AGENT, conversationOf(team, channel, ts));
    expect(view.transcript.filter((e) => e.role === "user").map((e) => e.text)).toEqual([
      "look at this\n\n[file graph.png (application/octet-stream, 0 bytes), not shown: a kind of file the agent cannot read]",
      "and this",
    ]);
  });
});

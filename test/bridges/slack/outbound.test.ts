// Delivery to Slack: 429 Retry-After (acceptance 7), long replies split in
// order (acceptance 8), Markdown → mrkdwn, a post whose answer was lost found
// again instead of posted twice, and a held post holding up only its own
// conversation (issue 9).
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { decisionValue } from "../../../approvals/index.ts";
import { apiBaseUrl } from "../../../bridges/slack/config.ts";
import { slackOutbound } from "../../../bridges/slack/outbound.ts";
import { SLACK_MARKDOWN_LIMIT, SLACK_TEXT_LIMIT, splitForSlack, toMrkdwn } from "../../../bridges/slack/mrkdwn.ts";
import { rows } from "../../agents.ts";
import { script, unique, waitFor } from "../../support.ts";
import { AGENT, holdSlack, messageEnvelope, newTs, postEvent, rateLimit, slackCalls, slackId, statusFinal, threadMessages } from "./helpers.ts";

/** A reply delivered straight through the Slack bridge into a thread of `channel` (with `ref`: in place of the message it names). */
function replyIn(channel: string, text: string, ref?: string) {
  return slackOutbound.deliver(env, {
    route: { tenant: slackId("T"), agent: AGENT },
    conversation: "c",
    address: { platform: "slack", target: { channel, thread_ts: "1.000001" } },
    message: { kind: "reply", text },
    idempotencyKey: "k",
    createdAt: Date.now(),
    ...(ref ? { ref } : {}),
  });
}

describe("Markdown → Slack mrkdwn", () => {
  it("renders emphasis, links, headings and bullets, and leaves code alone", () => {
    const markdown = [
      "# Plan",
      "This is **bold**, *italic*, _also italic_ and ~~gone~~.",
      "See [the docs](https://example.com/a?b=1&c=2) or <https://example.org>.",
      "- first",
      "* second",
      "Use `a < b && **not bold**` here.",
      "```ts",
      "if (a < b && c) { **x** }",
      "```",
    ].join("\n");
    expect(toMrkdwn(markdown)).toBe(
      [
        "*Plan*",
        "This is *bold*, _italic_, _also italic_ and ~gone~.",
        "See <https://example.com/a?b=1&amp;c=2|the docs> or <https://example.org>.",
        "• first",
        "• second",
        "Use `a &lt; b &amp;&amp; **not bold**` here.",
        "```",
        "if (a &lt; b &amp;&amp; c) { **x** }",
        "```",
      ].join("\n"),
    );
  });

  it("escapes Slack's control characters so model text cannot ping a channel", () => {
    expect(toMrkdwn("<!channel> <!here> <!subteam^S123> look <@U123 & co> <#nope>")).toBe(
      "&lt;!channel&gt; &lt;!here&gt; &lt;!subteam^S123&gt; look &lt;@U123 &amp; co&gt; &lt;#nope&gt;",
    );
  });

  it("keeps the model's well-formed channel links and mentions as links (labels escaped), in prose only", () => {
    expect(toMrkdwn("see <#C00FAKECHAN2>, <#C0ABC|general & more> and ask <@U0ANA|Ana> or <@W123>")).toBe(
      "see <#C00FAKECHAN2>, <#C0ABC|general &amp; more> and ask <@U0ANA|Ana> or <@W123>",
    );
    expect(toMrkdwn("`<#C00FAKECHAN2>`")).toBe("`&lt;#C00FAKECHAN2&gt;`");
  });

  it("splits at line boundaries within the limit, and closes and reopens a code block cut in two", () => {
    const code = ["```", ...Array.from({ length: 200 }, (_, i) => `const line${i} = ${i}; // ${"x".repeat(30)}`), "```"].join("\n");
    const parts = splitForSlack(code, 2000);
    expect(parts.length).toBeGreaterThan(1);
    for (const part of parts) {
      expect(toMrkdwn(part).length).toBeLessThanOrEqual(2000);
      expect(part.startsWith("```")).toBe(true);
      expect(part.endsWith("```")).toBe(true);
    }
    const lines = parts.flatMap((p) => p.split("\n").filter((l) => l !== "```"));
    expect(lines).toEqual(code.split("\n").filter((l) => l !== "```"));
  });

  it("cuts a line longer than the limit, even one that grows when escaped", () => {
    const parts = splitForSlack("&".repeat(10_000));
    for (const part of parts) expect(toMrkdwn(part).length).toBeLessThanOrEqual(SLACK_TEXT_LIMIT);
    expect(parts.join("")).toBe("&".repeat(10_000));
  });
});

describe("Slack outbound", () => {
  it("refuses a Web API base that would send bot tokens over plain http off this machine", () => {
    expect(() => apiBaseUrl({ ...env, SLACK_API_BASE_URL: "http://slack.example.com/api" })).toThrow(/SLACK_API_BASE_URL must be an https URL/);
    expect(apiBaseUrl({ ...env, SLACK_API_BASE_URL: "https://slack.com/api/" })).toBe("https://slack.com/api");
  });

  it("answers a 429 with the Retry-After it was given", async () => {
    const channel = slackId("C");
    await rateLimit({ method: "chat.postMessage", channel, times: 1, retryAfter: 7 });
    const result = await replyIn(channel, "hello");
    expect(result).toEqual({ ok: false, error: "chat.postMessage: rate limited", retryAfterMs: 7000 });
  });

  it("gives up on errors that would fail again (a channel that is gone: nothing more can be posted there)", async () => {
    const result = await replyIn("", "hello");
    expect(result).toEqual({ ok: false, error: "chat.postMessage: channel_not_found", permanent: true, unreachable: true });
  });

  it("an answer whose status message is gone (deleted by a person) is posted in the thread instead, not lost", async () => {
    const channel = slackId("C");
    const result = await replyIn(channel, "still here", "1.000002");
    expect(result).toMatchObject({ ok: true, ref: expect.any(String) });
    const calls = await slackCalls(channel);
    expect(calls.map((c) => [c.method, c.body.markdown_text])).toEqual([
      ["chat.update", "still here"],
      ["chat.postMessage", "still here"],
    ]);
    expect(calls[1]!.body.thread_ts).toBe("1.000001");
  });

  it("posts an approval card with Approve and Deny, then updates it in place once decided", async () => {
    const team = slackId("T");
    const channel = slackId("C");
    const route = { tenant: team, agent: AGENT };
    const pending = {
      holdId: "h1",
      state: "pending" as const,
      title: "Approval needed: ledger__append",
      tool: "ledger__append",
      arguments: '{\n  "entry": "pay <@U1> & co"\n}',
      requestedBy: "assistant",
      expiresAt: Date.now() + 3_600_000,
      actions: { approve: decisionValue(team, AGENT, "h1", true), deny: decisionValue(team, AGENT, "h1", false) },
    };
    const base = { route, conversation: "c", address: { platform: "slack" as const, target: { channel, thread_ts: "1.000001" } }, idempotencyKey: "k", createdAt: Date.now() };
    const posted = await slackOutbound.deliver(env, { ...base, message: { kind: "card", card: pending } });
    expect(posted).toMatchObject({ ok: true, ref: expect.any(String) });
    const decided = { ...pending, state: "denied" as const, title: "Denied: ledger__append", decidedBy: "UPERSON1", actions: undefined };
    expect(await slackOutbound.deliver(env, { ...base, message: { kind: "card", card: decided }, ref: (posted as { ref: string }).ref })).toEqual({ ok: true });

    const [post, update] = await slackCalls(channel);
    const buttons = (call: typeof post) => call!.body.blocks!.flatMap((b) => b.elements ?? []).filter((e) => e.action_id);
    expect(post!.method).toBe("chat.postMessage");
    expect(post!.body.thread_ts).toBe("1.000001");
    expect(buttons(post).map((b) => b.value)).toEqual([pending.actions.approve, pending.actions.deny]);
    expect(JSON.stringify(post!.body.blocks)).toContain("pay &lt;@U1&gt; &amp; co");
    expect(update!.method).toBe("chat.update");
    expect(update!.body.ts).toBe((posted as { ref: string }).ref);
    expect(buttons(update)).toEqual([]);
    expect(update!.body.text).toContain("Denied");
  });

  // Acceptance 7
  it("a reply rate limited with 429 is delivered after the Retry-After, once", async () => {
    const s = unique("ratelimit");
    await script(s, [{ text: "worth the wait" }]);
    const team = slackId("T");
    const channel = slackId("C");
    const ts = newTs();
    // The answer takes the status message's place: it goes as that message's chat.update.
    await rateLimit({ method: "chat.update", channel, textIncludes: "worth the wait", times: 1, retryAfter: 2 });
    await postEvent(messageEnvelope({ team, channel, ts, text: `[s:${s}] go` }));
    await waitFor("the 429", async () => (await slackCalls(channel, "chat.update")).some((c) => c.limited));
    // While it waits, the limited row is due no sooner than the Retry-After, and nothing queued behind it goes first;
    // the wait is not a failed attempt (the row's attempts and the effect's retries stay 0).
    const [head] = await waitFor("the limited row to wait", async () => {
      const waiting = await rows<{ due_at: number; retries: number; attempts: number }>(
        team,
        AGENT,
        "SELECT e.due_at, e.retries, o.attempts FROM effects e JOIN outbox o ON o.id = CAST(e.id AS INTEGER) WHERE e.kind = 'send' AND e.state = 'waiting' AND o.error LIKE '%rate limited%'",
      );
      return waiting.length > 0 && waiting;
    });
    expect([head!.retries, head!.attempts]).toEqual([0, 0]);
    const limited = (await slackCalls(channel, "chat.update")).find((c) => c.limited)!;
    expect(head!.due_at).toBeGreaterThanOrEqual(limited.at + 2000);
    await statusFinal(channel, "Done.");
    const attempts = (await slackCalls(channel, "chat.update")).filter((c) => c.body.markdown_text === "worth the wait");
    expect(attempts.map((c) => c.limited === true)).toEqual([true, false]);
    expect(attempts[1]!.at - attempts[0]!.at).toBeGreaterThanOrEqual(2000); // Slack's own clock: the second try waited it out
    expect((await threadMessages(channel)).map((m) => [m.body.markdown_text, m.body.thread_ts])).toEqual([["worth the wait", ts]]);
    // A 429 posted nothing: the retry does not read the thread back first.
    expect(await slackCalls(channel, "conversations.replies")).toEqual([]);
  });

  // Acceptance 8
  it("a reply longer than Slack's limit arrives as several messages, in order", async () => {
    const s = unique("long");
    const lines = Array.from({ length: 400 }, (_, i) => `Line ${i}: ${"word ".repeat(8)}`.trim());
    const reply = lines.join("\n");
    expect(reply.length).toBeGreaterThan(3 * SLACK_TEXT_LIMIT);
    await script(s, [{ text: reply }]);
    const team = slackId("T");
    const channel = slackId("C");
    const ts = newTs();
    await postEvent(messageEnvelope({ team, channel, ts, text: `[s:${s}] long please` }));
    await statusFinal(channel, "Done.");
    const messages = await threadMessages(channel);
    expect(messages.length).toBeGreaterThanOrEqual(4);
    for (const m of messages) {
      expect(m.body.thread_ts).toBe(ts);
      expect(m.body.markdown_text!.length).toBeLessThanOrEqual(SLACK_MARKDOWN_LIMIT);
    }
    expect(messages.map((m) => m.body.markdown_text).join("\n")).toBe(reply);
  });
});

/** The test env's SEND_TIMEOUT_SECONDS (test/fakes/index.mjs). */
const SEND_TIMEOUT_MS = Number((env as unknown as Record<string, string>).SEND_TIMEOUT_SECONDS) * 1000;

describe("a Slack post whose answer is lost", () => {
  it("is given up after the send timeout, then found in the thread by its key: one message, not two", async () => {
    const s = unique("lost");
    await script(s, [{ text: "said once" }]);
    const team = slackId("T");
    const channel = slackId("C");
    const ts = newTs();
    // Slack makes the turn's first post (its status message, which the answer then takes the place of) and never answers it.
    await holdSlack({ method: "chat.postMessage", channel, textIncludes: "Working on it" });
    await postEvent(messageEnvelope({ team, channel, ts, text: `[s:${s}] once` }));
    await statusFinal(channel, "Done.");

    const posts = (await slackCalls(channel, "chat.postMessage")).filter((c) => !c.limited);
    expect(posts).toHaveLength(1);
    expect(posts[0]!.body.metadata).toEqual({ event_type: "antiproton_outbox", event_payload: { key: expect.stringMatching(/^[0-9a-f]{64}:[0-9a-f]{16}:\d+$/) } });
    // The message found again is the one the answer edits.
    expect((await threadMessages(channel)).map((m) => [m.body.markdown_text, m.body.ts])).toEqual([["said once", posts[0]!.ts]]);
    // The row's next claim read the thread back, with metadata, once the first had timed out (Slack's clock).
    const [read] = await slackCalls(channel, "conversations.replies");
    expect(read).toBeDefined();
    expect(read!.body).toMatchObject({ ts, include_all_metadata: "true" });
    expect(read!.at - posts[0]!.at).toBeGreaterThanOrEqual(SEND_TIMEOUT_MS);
  });

  it("a DM's top-level reply is looked for in the channel's history: one message, not two", async () => {
    const s = unique("lost-dm");
    await script(s, [{ text: "said once in the DM" }]);
    const dm = slackId("D");
    await holdSlack({ method: "chat.postMessage", channel: dm, textIncludes: "Working on it" });
    await postEvent(messageEnvelope({ team: slackId("T"), channel: dm, ts: newTs(), text: `[s:${s}] once`, mention: false, event: { channel_type: "im" } }));
    await statusFinal(dm, "Done.");
    const [read] = await slackCalls(dm, "conversations.history");
    expect(read?.body).toMatchObject({ channel: dm, include_all_metadata: "true" });
    // Posted once, top-level (no thread): the read found it, and the answer took its place.
    const posts = await slackCalls(dm, "chat.postMessage");
    expect(posts).toHaveLength(1);
    expect(posts[0]!.body.thread_ts).toBeUndefined();
    expect((await threadMessages(dm)).map((m) => [m.body.markdown_text, m.body.ts])).toEqual([["said once in the DM", posts[0]!.ts]]);
  });

  // Issue 9, acceptance 1
  it("a post Slack holds for 20 s holds up only its conversation: a DM in the same workspace is answered within 3 s", async () => {
    const team = slackId("T");
    const held = slackId("C");
    const dm = slackId("D");
    await holdSlack({ method: "chat.postMessage", channel: held, ms: 20_000 });
    await postEvent(messageEnvelope({ team, channel: held, ts: newTs(), text: "the held one" }));
    await waitFor("the held post", async () => (await slackCalls(held, "chat.postMessage")).length > 0);

    // A Slack ts is when the message was sent; the fake records when it got the reply.
    const sent = (Date.now() / 1000).toFixed(6);
    await postEvent(messageEnvelope({ team, channel: dm, ts: sent, text: "quick one", mention: false, event: { channel_type: "im" } }));
    const [reply] = await waitFor("the DM's reply", async () => {
      const replies = await threadMessages(dm);
      return replies.length > 0 && replies;
    });
    expect(reply!.body.markdown_text).toBe("ok: quick one");
    expect(reply!.at - Number(sent) * 1000).toBeLessThanOrEqual(3000);

    // The held conversation goes on once its post is found again: one status message, one reply.
    await statusFinal(held, "Done.");
    expect((await slackCalls(held, "chat.postMessage")).filter((c) => c.body.blocks)).toHaveLength(1);
    expect((await threadMessages(held)).map((m) => m.body.markdown_text)).toEqual(["ok: the held one"]);
  });
});

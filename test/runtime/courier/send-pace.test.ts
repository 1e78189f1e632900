// The send pace learns a channel's limit from the platform (issue 40): a
// burst of threads in one channel is posted at once while Slack lets it
// (its "generous bursts"), and only Slack's 429 makes the channel wait: out
// its Retry-After, then at Slack's rate while the channel stays busy, and at
// once again when it has been quiet (runtime/courier/pace.ts). A reply told to
// wait goes before the other threads' status messages.
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { waitFor } from "../../support.ts";
import { messageEnvelope, newTs, postEvent, rateLimit, slackCalls, slackId, threadMessages } from "../../bridges/slack/helpers.ts";

/** Threads answered at once in one channel: the 16 conversations. */
const THREADS = 16;
/** Slack's Retry-After in the refusal, in seconds. */
const RETRY_AFTER_S = 2;

/** Mentions `texts` in `channel` all at once, each a new thread; their thread ts. */
async function mentionAll(team: string, channel: string, texts: string[]): Promise<string[]> {
  const threads = texts.map((text) => ({ ts: newTs(), text }));
  const answers = await Promise.all(threads.map((t) => postEvent(messageEnvelope({ team, channel, ts: t.ts, text: t.text }))));
  expect(answers.map((r) => r.status)).toEqual(threads.map(() => 200));
  return threads.map((t) => t.ts);
}

describe("the send pace learns from the platform", () => {
  it("16 threads' posts in one channel of a Slack without a limit go at once, not a second apart", { timeout: 120_000 }, async () => {
    const [team, channel] = [slackId("T"), slackId("C")];
    const texts = Array.from({ length: THREADS }, (_, i) => `busy channel ${i}`);
    await mentionAll(team, channel, texts);
    const replies = await waitFor("every reply", async () => ((await threadMessages(channel)).length === THREADS ? threadMessages(channel) : undefined), 90_000);
    expect(replies.map((c) => c.body.markdown_text).sort()).toEqual(texts.map((t) => `ok: ${t}`).sort());
    const posts = await slackCalls(channel, "chat.postMessage");
    // A status each, then edited into its answer: 16 posts (a second apart, two at once, they would take 14 s) and 16 edits.
    expect(posts.length).toBe(THREADS);
    const sent = [...posts, ...(await slackCalls(channel, "chat.update"))];
    const span = Math.max(...sent.map((c) => c.at)) - Math.min(...sent.map((c) => c.at));
    console.log(`16 threads in one channel: ${posts.length} posts and their edits over ${span} ms`);
    expect(span).toBeLessThan(10_000);
  });

  it("a 429 holds the channel until its Retry-After: the next posts there wait it out, and every reply is posted once", { timeout: 120_000 }, async () => {
    const [team, channel] = [slackId("T"), slackId("C")];
    await rateLimit({ method: "chat.postMessage", channel, times: 1, retryAfter: RETRY_AFTER_S });
    await mentionAll(team, channel, ["first"]);
    const refused = await waitFor("the refused post", async () => (await slackCalls(channel, "chat.postMessage")).find((c) => c.limited));
    const later = await mentionAll(team, channel, ["second", "third"]);
    const replies = await waitFor("every reply", async () => ((await threadMessages(channel)).length === 3 ? threadMessages(channel) : undefined), 90_000);
    expect(replies.map((c) => c.body.markdown_text).sort()).toEqual(["ok: first", "ok: second", "ok: third"]);
    // Nothing was asked of Slack in that channel before the Retry-After ran out (the courier's clock is the fake's here).
    const after = [...(await slackCalls(channel, "chat.postMessage")), ...(await slackCalls(channel, "chat.update"))].filter((c) => c.at > refused.at);
    // Each turn's status posted and edited into its answer, the refused one posted again.
    expect(after.length).toBeGreaterThanOrEqual(2 * 3);
    expect(Math.min(...after.map((c) => c.at)) - refused.at).toBeGreaterThanOrEqual(RETRY_AFTER_S * 1000 - 50);
    expect(new Set(replies.map((c) => c.body.thread_ts)).size).toBe(3);
    expect(later.every((ts) => replies.some((c) => c.body.thread_ts === ts))).toBe(true);
  });

  it("in a paced spell a reply told to wait has the next turn, before another thread's status that asks first; one that never comes back holds none up", async () => {
    const keeper = env.SEND_PACE.get(env.SEND_PACE.idFromName(`slack:${slackId("T")}`));
    const key = slackId("C");
    const sleepUntil = (at: number) => new Promise((r) => setTimeout(r, Math.max(0, at - Date.now())));
    // Woken first (its first call starts an object: seconds on a loaded machine); then Slack's word.
    await keeper.take(slackId("C"), 1_000, 2, true);
    const until = Date.now() + 2_000;
    await keeper.hold(key, until);
    // A reply and another thread's status, both told to wait out Slack's word.
    expect(await keeper.take(key, 1_000, 2, true, "reply")).toEqual({ go: false, at: until });
    expect(await keeper.take(key, 1_000, 2, true)).toEqual({ go: false, at: until });
    await sleepUntil(until + 10);
    // The status asks first, and is told to wait: the turn is the reply's.
    expect(await keeper.take(key, 1_000, 2, true)).toMatchObject({ go: false });
    expect(await keeper.take(key, 1_000, 2, true, "reply")).toEqual({ go: true });
    // A reply told to wait that never comes back (its courier gone) keeps its turn only a moment past it.
    const told = await keeper.take(key, 1_000, 2, true, "gone");
    if (told.go) throw new Error("the spacing after the reply let another send through at once");
    await sleepUntil(told.at + 1_100);
    expect(await keeper.take(key, 1_000, 2, true)).toEqual({ go: true });
  });

  it("after a hold, a learned key is paced at the platform's rate while busy, and at once again when quiet", { timeout: 90_000 }, async () => {
    const keeper = env.SEND_PACE.get(env.SEND_PACE.idFromName(`slack:${slackId("T")}`));
    const key = slackId("C");
    /** Waits `ms` with the keeper kept awake by another channel's sends (an idle object is evicted, and its numbers with it). */
    const awake = async (ms: number) => {
      for (const end = Date.now() + ms; Date.now() < end; ) {
        await keeper.take(slackId("C"), 1_000, 2, true);
        await new Promise((r) => setTimeout(r, Math.min(1_000, end - Date.now())));
      }
    };
    // Never held: as many at once as are asked for.
    for (let i = 0; i < 20; i++) expect(await keeper.take(key, 1_000, 2, true)).toEqual({ go: true });
    // The platform's word: nothing before it ends…
    const until = Date.now() + 500;
    await keeper.hold(key, until);
    expect(await keeper.take(key, 1_000, 2, true)).toEqual({ go: false, at: until });
    await new Promise((r) => setTimeout(r, until - Date.now() + 10));
    // …then one, and the next a spacing later: the platform's rate.
    expect(await keeper.take(key, 1_000, 2, true)).toEqual({ go: true });
    expect(await keeper.take(key, 1_000, 2, true)).toMatchObject({ go: false });
    // A send that waited keeps it paced 10 s past its turn, beyond the hold's own 10 s: two back to back, then a wait.
    await awake(until + 10_300 - Date.now());
    expect(await keeper.take(key, 1_000, 2, true)).toEqual({ go: true });
    expect(await keeper.take(key, 1_000, 2, true)).toEqual({ go: true });
    expect(await keeper.take(key, 1_000, 2, true)).toMatchObject({ go: false });
    // Quiet for the paced spell (10 s past the last send that waited): at once again.
    await awake(11_500);
    for (let i = 0; i < 5; i++) expect(await keeper.take(key, 1_000, 2, true)).toEqual({ go: true });
  });
});

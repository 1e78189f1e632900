// Chat platforms' rate limits are waits, not failures (issue 23, acceptance 4):
// a burst of mentions against fakes as strict as Slack (one post a second per
// channel, 429 + Retry-After beyond it) and Discord (route buckets told in
// their headers, 429 with retry_after beyond them, a global limit) is
// answered whole: every reply once, every status final, and few 429s, because
// the couriers take turns per channel (runtime/courier/pace.ts) instead of
// bouncing.
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import recorded from "../../fixtures/discord/discord.json";
import { forward, snowflake } from "../../bridges/discord/helpers.ts";
import { waitFor } from "../../support.ts";
import { messageEnvelope, newTs, postEvent, slackId, type SlackCall } from "../../bridges/slack/helpers.ts";

const E = env as unknown as Record<string, string>;
/** Issue 23's burst: 20 threads a channel answered at once. */
const BURST = { mentions: 300, channels: 15 };
/** Posting the mentions this many at a time, as Slack delivers events side by side. */
const AT_ONCE = 30;

async function inBatches<T>(items: T[], send: (item: T) => Promise<Response>): Promise<void> {
  for (let i = 0; i < items.length; i += AT_ONCE) {
    const answers = await Promise.all(items.slice(i, i + AT_ONCE).map((item) => send(item)));
    expect(answers.map((r) => r.status).filter((s) => s >= 300)).toEqual([]);
  }
}

async function slackBurst({ mentions: MENTIONS, channels: CHANNELS }: typeof BURST): Promise<void> {
  {
    const team = slackId("T");
    const channels = Array.from({ length: CHANNELS }, () => slackId("C"));
    // Slack's pace: one post a second per channel, "short bursts >1 allowed" (two here).
    await fetch(`${E.FAKE_SLACK_URL}/_control/pace`, { method: "POST", body: JSON.stringify({ channels, spacingMs: 1000, burst: 2 }) });
    const threads = Array.from({ length: MENTIONS }, (_, i) => ({ channel: channels[i % CHANNELS]!, ts: newTs(), text: `mention ${i}` }));
    await inBatches(threads, (t) => postEvent(messageEnvelope({ team, channel: t.channel, ts: t.ts, text: t.text })));

    const callsIn = async (channel: string): Promise<SlackCall[]> => (await fetch(`${E.FAKE_SLACK_URL}/_control/calls?channel=${channel}`)).json();
    /** Each thread's status message as it stands (the last state Slack took), by thread ts: "Done." once edited into the answer too. */
    const statuses = (calls: SlackCall[]) => {
      const threadOf = new Map(calls.filter((c) => c.method === "chat.postMessage" && c.body.blocks && c.ts).map((c) => [c.ts!, c.body.thread_ts!]));
      const last = new Map<string, string>();
      for (const c of calls) {
        if (c.limited || !(c.body.blocks || (c.method === "chat.update" && c.body.markdown_text !== undefined))) continue;
        const thread = c.method === "chat.postMessage" ? c.body.thread_ts : threadOf.get(c.body.ts!);
        if (thread) last.set(thread, c.body.blocks ? c.body.text! : "Done.");
      }
      return last;
    };
    const calls = await waitFor(
      "every status to be final",
      async () => {
        const all = (await Promise.all(channels.map(callsIn))).flat();
        const final = [...statuses(all).values()].filter((text) => text.endsWith("Done.")).length;
        return final === MENTIONS && all;
      },
      // Three times the paced floor: a loaded machine is slow, not wrong.
      MENTIONS * 3_000,
    );
    // A reply is posted, or (a plain turn) its status message edited into it.
    const threadOf = new Map(calls.filter((c) => c.method === "chat.postMessage" && c.body.blocks && c.ts).map((c) => [c.ts!, c.body.thread_ts!]));
    const replies = calls
      .filter((c) => (c.method === "chat.postMessage" ? !c.body.blocks : c.method === "chat.update" && c.body.markdown_text !== undefined) && !c.limited && c.authorized)
      .map((c) => ({ ...c, body: { ...c.body, thread_ts: c.body.thread_ts ?? threadOf.get(c.body.ts!) } }));
    expect(replies.map((c) => `${c.body.channel} ${c.body.thread_ts} ${c.body.markdown_text}`).sort()).toEqual(threads.map((t) => `${t.channel} ${t.ts} ok: ${t.text}`).sort());
    expect([...statuses(calls).entries()].sort()).toEqual(threads.map((t) => [t.ts, expect.stringMatching(/Done\.$/)]).sort());
    // Paced once refused, not bounced: sends go at once until Slack refuses one, then the channel's couriers take
    // turns (runtime/courier/pace.ts), so a post is refused about once at most. How many of a channel's first wave
    // go before its first 429 is answered is the machine's timing (a loaded one sends all 20 at once: about 255
    // refusals, one a post; an idle one about 60); a pace that did not learn refuses each post again at every
    // retry (about five times a post), so fewer refusals than posts made is the line between the two.
    const posts = calls.filter((c) => c.method === "chat.postMessage");
    const refused = posts.filter((c) => c.limited).length;
    console.log(`Slack: ${posts.length - refused} posts in ${CHANNELS} channels, ${refused} refused with 429`);
    expect(refused).toBeLessThan(posts.length - refused);
  }
}

async function discordBurst({ mentions: MENTIONS }: typeof BURST): Promise<void> {
  {
    const guild = snowflake();
    const channels = Array.from({ length: MENTIONS }, () => snowflake());
    // One create (and one edit) per channel in 3 s, and 50 calls a second in all: a turn's status and reply cannot both go at once.
    await fetch(`${E.FAKE_DISCORD_URL}/_control/buckets`, { method: "POST", body: JSON.stringify({ channels, limit: 1, resetAfter: 3, global: 50 }) });
    const mention = recorded.gatewayMention.data;
    await inBatches(
      channels.map((channel, i) => ({ channel, i })),
      ({ channel, i }) => forward({ ...mention, id: snowflake(), guild_id: guild, channel_id: channel, content: `<@${E.DISCORD_APPLICATION_ID}> mention ${i}` }),
    );

    type Call = { method: string; kind: string; channelId?: string; status: number; limited?: string; body: { content?: string } | null };
    const mine = new Set(channels);
    const calls = await waitFor(
      "every status to be final",
      async () => {
        const all = ((await (await fetch(`${E.FAKE_DISCORD_URL}/_control/calls?kind=channel`)).json()) as Call[]).filter((c) => mine.has(c.channelId!));
        const done = new Set(all.filter((c) => c.method === "PATCH" && c.status === 200 && c.body?.content?.includes("Done.")).map((c) => c.channelId));
        return done.size === MENTIONS && all;
      },
      // Three times the paced floor: a loaded machine is slow, not wrong.
      MENTIONS * 3_000,
    );
    const replies = calls.filter((c) => c.method === "POST" && c.status === 200 && !c.body?.content?.startsWith("⏳"));
    expect(replies.map((c) => `${c.channelId} ${c.body!.content}`).sort()).toEqual(channels.map((c, i) => `${c} ok: mention ${i}`).sort());
    const refused = calls.filter((c) => c.status === 429);
    console.log(
      `Discord: ${calls.length - refused.length} calls in ${MENTIONS} channels, ${refused.filter((c) => c.limited === "route").length} refused by a route bucket, ${refused.filter((c) => c.limited === "global").length} by the global limit`,
    );
    // A channel's own calls wait out what its bucket's headers said: a spent bucket is not asked again before it resets.
    expect(refused.filter((c) => c.limited === "route").length).toBeLessThan(calls.length * 0.05);
    expect(refused.length).toBeLessThan(calls.length * 0.25);
  }
}

describe("chat platforms' limits", () => {
  const slack = (size: typeof BURST) => `Slack: ${size.mentions} mentions over ${size.channels} channels paced to one post a second each: every reply once, every status final, few 429s`;
  const discord = (size: typeof BURST) => `Discord: ${size.mentions} mentions in as many channels under route buckets and the global limit: every reply once, every status final, few 429s`;
  // The deadline inside is three times the paced floor; the test's own limit only stops a run that hangs.
  it(slack(BURST), { timeout: 20 * 60_000 }, () => slackBurst(BURST));
  it(discord(BURST), { timeout: 20 * 60_000 }, () => discordBurst(BURST));

  it("one pace object keeps a workspace's channels, each with its own bucket: a spent channel holds up no other", async () => {
    const keeper = env.SEND_PACE.get(env.SEND_PACE.idFromName(`slack:${slackId("T")}`));
    const [busy, quiet] = [slackId("C"), slackId("C")];
    // A burst of two back to back in one channel, then it waits its spacing…
    expect(await keeper.take(busy, 60_000, 2)).toEqual({ go: true });
    expect(await keeper.take(busy, 60_000, 2)).toEqual({ go: true });
    expect(await keeper.take(busy, 60_000, 2)).toMatchObject({ go: false });
    // …while another channel of the workspace still has its own.
    expect(await keeper.take(quiet, 60_000, 2)).toEqual({ go: true });
    await keeper.hold(quiet, Date.now() + 60_000);
    expect(await keeper.take(quiet, 60_000, 2)).toMatchObject({ go: false });
  });
});

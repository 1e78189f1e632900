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
    /** What each call shows in which thread (a status message's state, or the reply), among those Slack took: one it refused showed nothing. */
    const shown = (calls: SlackCall[]) => {
      const threadOf = new Map(calls.filter((c) => c.method === "chat.postMessage" && c.ts).map((c) => [c.ts!, c.body.thread_ts!]));
      return calls
        .filter((c) => !c.limited && c.authorized && (c.method === "chat.postMessage" || c.method === "chat.update"))
        .map((c) => ({
          thread: (c.method === "chat.postMessage" ? c.body.thread_ts : threadOf.get(c.body.ts!))!,
          // A status carries blocks (its Stop button); a reply is markdown, posted or edited into its status message.
          status: c.body.blocks ? c.body.text! : undefined,
          reply: c.body.blocks ? undefined : c.body.markdown_text,
          answersStatus: c.method === "chat.update" && !c.body.blocks,
        }));
    };
    /**
     * Each thread's status message as it stands: its last state, or "answered"
     * once edited into the reply. A thread whose status Slack refused, and whose
     * answer was ready before the status was sent again, has none: the answer
     * took the waiting status's place (runtime/effects/outbox.ts, answerInStatus).
     */
    const statuses = (calls: SlackCall[]) => {
      const last = new Map<string, string>();
      for (const s of shown(calls)) if (s.status !== undefined || s.answersStatus) last.set(s.thread, s.status ?? "answered");
      return last;
    };
    const final = (status: string) => status === "answered" || status.endsWith("Done.");
    const calls = await waitFor(
      "every reply, and every status final",
      async () => {
        const all = (await Promise.all(channels.map(callsIn))).flat();
        const replied = new Set(shown(all).filter((s) => s.reply !== undefined).map((s) => s.thread)).size;
        return replied === MENTIONS && [...statuses(all).values()].every(final) && all;
      },
      // Three times the paced floor: a loaded machine is slow, not wrong.
      MENTIONS * 3_000,
    );
    const replies = shown(calls).filter((s) => s.reply !== undefined);
    expect(replies.map((s) => `${s.thread} ${s.reply}`).sort()).toEqual(threads.map((t) => `${t.ts} ok: ${t.text}`).sort());
    const stale = [...statuses(calls)].filter(([, status]) => !final(status));
    expect(stale).toEqual([]);
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
    /** A status reads as its state's icon, then the text (bridges/shared/status.ts); anything else the agent posts is a reply. */
    const isStatus = (c: Call) => /^(⏳|✅|⏹️|⚠️) /u.test(c.body?.content ?? "");
    const taken = (calls: Call[]) => calls.filter((c) => c.status === 200 && (c.method === "POST" || c.method === "PATCH"));
    /**
     * Each channel's status message as it stands (its last state Discord took).
     * A status refused, whose turn ended before it was sent again, goes once in
     * its last state: the waiting row takes each later state (runtime/effects/outbox.ts).
     */
    const statuses = (calls: Call[]) => new Map(taken(calls).filter(isStatus).map((c) => [c.channelId!, c.body!.content!]));
    const calls = await waitFor(
      "every reply, and every status final",
      async () => {
        const all = ((await (await fetch(`${E.FAKE_DISCORD_URL}/_control/calls?kind=channel`)).json()) as Call[]).filter((c) => mine.has(c.channelId!));
        const states = statuses(all);
        const replied = new Set(taken(all).filter((c) => c.method === "POST" && !isStatus(c)).map((c) => c.channelId)).size;
        return replied === MENTIONS && states.size === MENTIONS && [...states.values()].every((text) => text.endsWith("Done.")) && all;
      },
      // Three times the paced floor: a loaded machine is slow, not wrong.
      MENTIONS * 3_000,
    );
    const replies = taken(calls).filter((c) => c.method === "POST" && !isStatus(c));
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

// A reply streamed into a Discord channel while the model writes it (issue 17):
// one message posted by the bot and edited at most once a second, finished by
// the object's outbox with the whole reply; never a second copy.
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import recorded from "../../fixtures/discord/discord.json";
import { forward, snowflake } from "./helpers.ts";
import { script, unique, waitFor } from "../../support.ts";
// Loads the Worker's modules when the file is, not during the first request (which would then take long).
import "../../../worker.ts";

const E = env as unknown as Record<string, string>;
const APP = E.DISCORD_APPLICATION_ID!;

interface Call {
  method: string;
  messageId?: string;
  responseId?: string;
  status: number;
  at: number;
  body: { content: string };
}

async function calls(channel: string): Promise<Call[]> {
  return (await fetch(`${E.FAKE_DISCORD_URL}/_control/calls?${new URLSearchParams({ channel })}`)).json();
}

const REPLY = "Streaming works on Discord too: this answer arrives a few words at a time, and ends here.";

describe("a reply streamed into a Discord channel", () => {
  it("is one message, edited at most once a second, that the outbox finishes with the whole reply", async () => {
    const s = unique("dstream");
    await script(s, [{ text: REPLY, argumentChunk: 4, chunkDelayMs: 150 }]);
    const channel = snowflake();
    await forward({ ...recorded.gatewayMention.data, id: snowflake(), channel_id: channel, content: `<@${APP}> [s:${s}] tell me` });
    const list = await waitFor("the turn's status to say Done.", async () => {
      const all = await calls(channel);
      return all.some((c) => c.method === "PATCH" && c.status === 200 && c.body.content.includes("Done.")) && all;
    });
    console.log(JSON.stringify(list.map((c) => [c.method, c.at - list[0]!.at, c.status, c.body?.content?.slice(0, 30)])));
    // The streamed message: the bot's first post that is not the status (which starts with its icon).
    const opened = list.find((c) => c.method === "POST" && c.status === 200 && !c.body.content.startsWith("⏳"))!;
    expect(REPLY.startsWith(opened.body.content)).toBe(true);
    const edits = list.filter((c) => c.method === "PATCH" && c.messageId === opened.responseId);
    expect(edits.length).toBeGreaterThan(1);
    const times = [opened, ...edits].map((c) => c.at);
    // By the fake's own clock: never two changes of the message within a second.
    for (let i = 1; i < times.length; i++) expect(times[i]! - times[i - 1]!).toBeGreaterThanOrEqual(1000);
    expect(edits.at(-1)!.body.content).toBe(REPLY);
    // No second copy of the reply was posted.
    expect(list.filter((c) => c.method === "POST" && c.body.content === REPLY)).toEqual([]);
    expect(list.filter((c) => c.method === "POST" && !c.body.content.startsWith("⏳"))).toHaveLength(1);
    // The first event of a file's workerd takes long to be accepted (a cold start, not streaming's).
  }, 60_000);
});

describe("a broadcast the model writes on Discord", () => {
  it("pings nobody, in a streamed reply and in one posted whole", async () => {
    const text = "Hello @everyone and @here: nothing to see, this reply goes on for a little while and then it ends.";
    const [streamed, posted] = [unique("everyone-stream"), unique("everyone-post")];
    await script(streamed, [{ text, argumentChunk: 4, chunkDelayMs: 100 }]);
    await script(posted, [{ text }]);
    for (const s of [streamed, posted]) {
      const channel = snowflake();
      await forward({ ...recorded.gatewayMention.data, id: snowflake(), channel_id: channel, content: `<@${APP}> [s:${s}] say it` });
      const messages = await waitFor("the reply", async () => {
        const list: { content: string; mention_everyone?: boolean }[] = await (await fetch(`${E.FAKE_DISCORD_URL}/_control/messages?${new URLSearchParams({ channel })}`)).json();
        return list.some((m) => m.content === text) && list;
      });
      expect(messages.filter((m) => m.mention_everyone)).toEqual([]);
    }
  }, 60_000);
});

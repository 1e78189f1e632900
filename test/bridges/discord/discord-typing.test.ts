// Discord's typing indicator while a turn works: shown once the turn has run
// 8 s (its status message says it is working before that, so a short turn
// makes no such call), renewed before it fades (Discord's lasts 10 s) off the
// object, never after the turn's reply, and nothing left armed once the turn ends.
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import recorded from "../../fixtures/discord/discord.json";
import { rows } from "../../agents.ts";
import { forward, snowflake } from "./helpers.ts";
import { releaseProvider, script, settled, unique, waitFor } from "../../support.ts";

const E = env as unknown as Record<string, string>;
const AGENT = "assistant";
const guild = recorded.metadata.guildId;

interface Typing {
  channelId: string;
  authorized: boolean;
  at: number;
}
interface Call {
  method: string;
  status: number;
  at: number;
  body: { content: string } | null;
}

const typings = async (channel: string): Promise<Typing[]> => (await fetch(`${E.FAKE_DISCORD_URL}/_control/typing?channel=${channel}`)).json();
const calls = async (channel: string): Promise<Call[]> => (await fetch(`${E.FAKE_DISCORD_URL}/_control/calls?channel=${channel}`)).json();

describe("Discord typing indicator", () => {
  it("is triggered while a long turn runs, renewed while it lasts, and not after it ends", { timeout: 90_000 }, async () => {
    const s = unique("typing");
    const channel = snowflake();
    await script(s, [{ hold: true, text: "Here you are." }]);
    const mention = recorded.gatewayMention.data;
    expect((await forward({ ...mention, id: snowflake(), channel_id: channel, content: `<@${E.DISCORD_APPLICATION_ID}> [s:${s}] think hard` })).status).toBe(202);

    // The model is held: the indicator is shown once the turn has run 8 s, then renewed before Discord's 10 s run out.
    const shown = await waitFor("typing renewed", async () => {
      const list = await typings(channel);
      return list.length >= 2 && list;
    }, 60_000);
    expect(shown.every((t) => t.authorized)).toBe(true);
    // Renewed off the object, before it fades (the fake's own clock).
    expect(shown[1]!.at - shown[0]!.at).toBeLessThan(10_000);
    await releaseProvider(s);

    const list = await waitFor("the final status", async () => {
      const all = await calls(channel);
      return all.some((c) => c.method === "PATCH" && c.status === 200 && c.body?.content.includes("Done.")) && all;
    });
    const reply = list.find((c) => c.method === "POST" && c.body?.content === "Here you are.")!;
    expect((await typings(channel)).every((t) => t.at <= reply.at)).toBe(true);
    // Nothing is left to renew it.
    await settled(guild, AGENT, channel);
    expect(await rows(guild, AGENT, "SELECT * FROM effects WHERE kind = 'typing' AND conversation = ?", channel)).toEqual([]);
  });

  it("is not called in a short turn: its status message shows it working, and the turn makes three calls", async () => {
    const s = unique("typing-short");
    const channel = snowflake();
    await script(s, [{ text: "Quick one." }]);
    const mention = recorded.gatewayMention.data;
    expect((await forward({ ...mention, id: snowflake(), channel_id: channel, content: `<@${E.DISCORD_APPLICATION_ID}> [s:${s}] quick` })).status).toBe(202);
    const list = await waitFor("the final status", async () => {
      const all = await calls(channel);
      return all.some((c) => c.method === "PATCH" && c.status === 200 && c.body?.content.includes("Done.")) && all;
    });
    await settled(guild, AGENT, channel);
    expect(await typings(channel)).toEqual([]);
    // The reply's message is opened by its courier's stream, beside the status's send lane: either may come first.
    expect(list.map((c) => `${c.method} ${c.body?.content}`).sort()).toEqual(["PATCH ✅ Done.", "POST Quick one.", "POST ⏳ Working on it…"].sort());
  });
});

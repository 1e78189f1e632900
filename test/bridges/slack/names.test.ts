// Channel links and mentions both ways: the model reads them with their names
// (looked up with conversations.info / users.info before the event is
// accepted, cached per workspace), and its own links reach Slack as links.
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { providerRequests, script, unique } from "../../support.ts";
import recorded from "../../fixtures/slack/channel-mention-slack.json";
import { messageEnvelope, postEvent, replay, slackCalls, slackId, statusFinal, threadMessages } from "./helpers.ts";

const FAKE_SLACK_URL = (env as unknown as Record<string, string>).FAKE_SLACK_URL!;

async function directory(entries: { channels?: Record<string, string>; users?: Record<string, { name: string; real_name?: string; display_name?: string }> }): Promise<void> {
  await fetch(`${FAKE_SLACK_URL}/_control/directory`, { method: "PUT", body: JSON.stringify(entries) });
}

/** The text of the last user message the provider received. */
const lastUserText = async (s: string) => String((await providerRequests(s)).at(-1)!.body.messages.findLast((m) => m.role === "user")!.content);

describe("Slack channel links and mentions", () => {
  it("a recorded channel mention reaches the model with the channel's name, and a reply naming it shows a link", async () => {
    await directory({ channels: { C00FAKECHAN2: "design-reviews" } });
    const s = unique("chan");
    await script(s, [{ text: "That is <#C00FAKECHAN2|design-reviews>; see **<#C00FAKECHAN2>** & ask there." }]);
    const channel = slackId("C");
    const text = `${recorded.mention.event.text} [s:${s}]`;
    expect((await postEvent(replay(recorded.mention, { team: slackId("T"), channel, event: { text } }))).status).toBe(200);
    await statusFinal(channel, "Done.");
    expect(await lastUserText(s)).toBe(`Can you see the name of this channel: <#C00FAKECHAN2|design-reviews>? [s:${s}]`);
    const [reply] = await threadMessages(channel);
    // Sent as Slack's own Markdown: the link stays a link, as the model wrote it.
    expect(reply!.body.markdown_text).toBe("That is <#C00FAKECHAN2|design-reviews>; see **<#C00FAKECHAN2>** & ask there.");
  });

  it("mentions get the person's display name; an id Slack does not know stays as it was; names are looked up once per workspace", async () => {
    const team = slackId("T");
    const ana = slackId("U");
    const unknown = slackId("C");
    const known = slackId("C");
    await directory({ users: { [ana]: { name: "ana", real_name: "Ana Lopez", display_name: "ana.l" } }, channels: { [known]: "launch" } });
    const s = unique("who");
    await script(s, [{ text: "Noted." }]);
    const channel = slackId("C");
    await postEvent(messageEnvelope({ team, channel, ts: "1700000000.000100", text: `[s:${s}] ask <@${ana}> about <#${known}> and <#${unknown}>` }));
    await statusFinal(channel, "Done.");
    expect(await lastUserText(s)).toBe(`[s:${s}] ask <@${ana}|ana.l> about <#${known}|launch> and <#${unknown}>`);

    const again = slackId("C");
    await postEvent(messageEnvelope({ team, channel: again, ts: "1700000000.000200", text: `[s:${s}] and <#${known}> again` }));
    await statusFinal(again, "Done.");
    expect(await lastUserText(s)).toBe(`[s:${s}] and <#${known}|launch> again`);
    const lookups = await slackCalls(known, "conversations.info");
    expect(lookups).toHaveLength(1);
    // Read methods are called with form arguments and the workspace's bot token.
    expect(lookups[0]!.token).toBe("xoxb-fake-single-workspace-token");
  });
});

// The App Home tab: opened, it is published for that person with the agent's
// description, the approvals waiting for them, and how to start.
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { script, unique, waitFor } from "../../support.ts";
import { isCard, messageEnvelope, newTs, postEvent, slackCalls, slackId } from "./helpers.ts";

const FAKE_SLACK_URL = (env as unknown as Record<string, string>).FAKE_SLACK_URL!;

interface Publish {
  body: { user_id: string; view: { type: string; blocks: unknown[] } };
}

/** app_home_opened as Slack sends it. */
function homeOpened(team: string, user: string, tab: "home" | "messages") {
  return {
    token: "verification-token",
    team_id: team,
    api_app_id: "AFAKEAPP",
    type: "event_callback",
    event_id: slackId("Ev"),
    event_time: Math.floor(Date.now() / 1000),
    authorizations: [{ enterprise_id: null, team_id: team, user_id: "UFAKEBOT", is_bot: true, is_enterprise_install: false }],
    event: { type: "app_home_opened", user, channel: slackId("D"), tab, event_ts: newTs(), ...(tab === "home" ? { view: { id: "VOLD", type: "home" } } : {}) },
  };
}

const publishedFor = (user: string) =>
  waitFor(`the Home tab of ${user}`, async () => {
    const calls: Publish[] = await (await fetch(`${FAKE_SLACK_URL}/_control/calls?method=views.publish`)).json();
    return calls.find((c) => c.body.user_id === user);
  });

describe("Slack App Home", () => {
  it("shows the agent's description, the person's own pending approvals, and how to start", async () => {
    const team = slackId("T");
    const asker = slackId("U");
    const other = slackId("U");
    const channel = slackId("C");
    const s = unique("home");
    await script(s, [{ toolCalls: [{ name: "vault__append", arguments: { entry: "home-entry" } }] }, { text: "Waiting for your approval." }]);
    await postEvent(messageEnvelope({ team, channel, ts: newTs(), text: `[s:${s}] record it`, user: asker }));
    await waitFor("the card", async () => (await slackCalls(channel, "chat.postMessage")).find(isCard));

    // The Messages tab is not the Home tab: only "home" publishes.
    expect((await postEvent(homeOpened(team, asker, "messages"))).status).toBe(200);
    expect((await postEvent(homeOpened(team, asker, "home"))).status).toBe(200);
    const mine = JSON.stringify((await publishedFor(asker)).body.view);
    expect(mine).toContain("is an AI agent that works in this workspace");
    expect(mine).toContain("Approval needed: vault__append");
    expect(mine).toContain("home-entry");
    expect(mine).toContain(`in <#${channel}>`);
    expect(mine).toContain("How to start");

    // Someone who may not decide it sees nothing waiting.
    await postEvent(homeOpened(team, other, "home"));
    const theirs = JSON.stringify((await publishedFor(other)).body.view);
    expect(theirs).not.toContain("vault__append");
    expect(theirs).toContain("Nothing is waiting for you.");
    const calls: Publish[] = await (await fetch(`${FAKE_SLACK_URL}/_control/calls?method=views.publish`)).json();
    expect(calls.filter((c) => c.body.user_id === asker)).toHaveLength(1);
  });

  it("a malformed app_home_opened → 400, nothing published", async () => {
    const team = slackId("T");
    const bad = homeOpened(team, "not a user id!", "home");
    expect((await postEvent(bad)).status).toBe(400);
  });
});

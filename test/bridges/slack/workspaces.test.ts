// Tenancy: one object per workspace (acceptance 6), multi-workspace OAuth
// install with bot tokens encrypted at rest, Enterprise Grid org installs.
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { listAgents, tenantRecord } from "../../../runtime/index.ts";
import { getConversation, waitFor, worker } from "../../support.ts";
import { AGENT, conversationOf, grantOauthCode, installWorkspace, messageEnvelope, newTs, postEvent, slackId, statusFinal, threadMessages } from "./helpers.ts";

describe("Slack workspaces", () => {
  it("/slack/install sends the person to Slack's consent page with the bot scopes", async () => {
    const res = await worker("/slack/install", { redirect: "manual" });
    const location = new URL(res.headers.get("location")!);
    expect(location.origin + location.pathname).toBe("https://slack.com/oauth/v2/authorize");
    expect(location.searchParams.get("client_id")).toBe("1111.2222");
    expect(location.searchParams.get("scope")!.split(",")).toEqual(expect.arrayContaining(["chat:write", "commands", "app_mentions:read"]));
    expect(location.searchParams.get("redirect_uri")).toBe("http://antiproton.test/slack/oauth/callback");
    expect(res.headers.get("set-cookie")).toMatch(/HttpOnly/);
  });

  it("stores the installed workspace's bot token encrypted, and replies with it", async () => {
    const team = slackId("T");
    const token = await installWorkspace({ team });
    const stored = await tenantRecord(env, team, "slack-installations");
    expect(stored).toMatchObject({ tenant: team, teamId: team, botUserId: "UFAKEBOT" });
    expect(JSON.stringify(stored)).not.toContain(token);

    const channel = slackId("C");
    await postEvent(messageEnvelope({ team, channel, ts: newTs(), text: "hello from an installed workspace" }));
    await statusFinal(channel, "Done.");
    const replies = await threadMessages(channel);
    expect(replies.map((r) => [r.body.markdown_text, r.token])).toEqual([["ok: hello from an installed workspace", token]]);
  });

  it("an install lists the workspace in the console's directory with its name; its first event keeps both", async () => {
    const team = slackId("T");
    await installWorkspace({ team, teamName: "Acme <Corp>" });
    expect(await listAgents(env, team)).toEqual([{ tenant: team, agent: AGENT, platform: "slack", displayName: "Acme <Corp>", firstSeen: expect.any(Number) }]);
    const firstSeen = (await listAgents(env, team))[0]!.firstSeen;
    const channel = slackId("C");
    await postEvent(messageEnvelope({ team, channel, ts: newTs(), text: "hello" }));
    await statusFinal(channel, "Done.");
    expect(await listAgents(env, team)).toEqual([{ tenant: team, agent: AGENT, platform: "slack", displayName: "Acme <Corp>", firstSeen }]);
    // An org-wide install is named after the organisation.
    const enterprise = slackId("E");
    await installWorkspace({ enterprise, enterpriseName: "Acme Group", team: slackId("T"), teamName: "a workspace", isEnterpriseInstall: true });
    expect((await listAgents(env, enterprise))[0]).toMatchObject({ displayName: "Acme Group", platform: "slack" });
  });

  it("refuses a callback with a forged state, or from a browser that did not start the install", async () => {
    const code = slackId("code");
    await grantOauthCode(code, { team: slackId("T"), token: "xoxb-never", botUserId: "UFAKEBOT" });
    const forged = await worker(`/slack/oauth/callback?code=${code}&state=${Math.floor(Date.now() / 1000)}.nonce.${"0".repeat(64)}`, {
      headers: { cookie: "slack_oauth_state=nonce" },
    });
    expect(forged.status).toBe(403);
    const start = await worker("/slack/install", { redirect: "manual" });
    const state = new URL(start.headers.get("location")!).searchParams.get("state")!;
    const otherBrowser = await worker(`/slack/oauth/callback?code=${code}&state=${encodeURIComponent(state)}`, { headers: { cookie: "slack_oauth_state=someone-else" } });
    expect(otherBrowser.status).toBe(403);
    expect(await worker(`/slack/oauth/callback?error=access_denied&state=${encodeURIComponent(state)}`)).toHaveProperty("status", 400);
  });

  // Acceptance 6
  it("two workspaces with the same agent are two objects with separate transcripts and their own tokens", async () => {
    const teams = [slackId("T"), slackId("T")];
    const tokens = [await installWorkspace({ team: teams[0] }), await installWorkspace({ team: teams[1] })];
    // The same channel id and timestamp in both workspaces: only the workspace tells them apart.
    const channel = slackId("C");
    const ts = newTs();
    for (const [i, team] of teams.entries()) await postEvent(messageEnvelope({ team, channel, ts, text: `secret of workspace ${i}` }));
    const replies = await waitFor("both replies", async () => {
      const messages = await threadMessages(channel);
      return messages.length >= 2 && messages;
    });
    expect(replies.map((r) => [r.body.markdown_text, r.token]).sort()).toEqual(
      [
        ["ok: secret of workspace 0", tokens[0]],
        ["ok: secret of workspace 1", tokens[1]],
      ].sort(),
    );
    for (const [i, team] of teams.entries()) {
      const view = await getConversation(team, AGENT, conversationOf(team, channel, ts));
      expect(view.transcript.map((e) => e.text)).toEqual([`secret of workspace ${i}`, `ok: secret of workspace ${i}`]);
      const other = teams[1 - i]!;
      await expect(getConversation(team, AGENT, conversationOf(other, channel, ts))).rejects.toThrow(/404/);
    }
  });

  it("in a Slack Connect channel the tenant is the installing workspace (authorizations[0]), not the sender's team_id", async () => {
    const installing = slackId("T");
    const sender = slackId("T");
    const channel = slackId("C");
    const ts = newTs();
    const envelope = messageEnvelope({ team: installing, channel, ts, text: "from a shared channel" });
    envelope.team_id = sender;
    await postEvent(envelope);
    await statusFinal(channel, "Done.");
    const view = await getConversation(installing, AGENT, conversationOf(installing, channel, ts));
    expect(view.transcript.map((e) => e.text)).toEqual(["from a shared channel", "ok: from a shared channel"]);
  });

  it("an org-wide (Enterprise Grid) install is one tenant for the organisation", async () => {
    const enterprise = slackId("E");
    const token = await installWorkspace({ enterprise, isEnterpriseInstall: true });
    const team = slackId("T");
    const channel = slackId("C");
    const ts = newTs();
    const envelope = messageEnvelope({ team, channel, ts, text: "from a grid workspace" });
    envelope.enterprise_id = enterprise;
    envelope.authorizations = [{ enterprise_id: enterprise, team_id: null, user_id: "UFAKEBOT", is_bot: true, is_enterprise_install: true }];
    await postEvent(envelope);
    await statusFinal(channel, "Done.");
    const view = await getConversation(enterprise, AGENT, conversationOf(enterprise, channel, ts));
    expect(view.transcript.map((e) => e.text)).toEqual(["from a grid workspace", "ok: from a grid workspace"]);
    expect((await threadMessages(channel)).map((r) => r.token)).toEqual([token]);
  });
});

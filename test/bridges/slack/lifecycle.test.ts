// A Slack app's life in a workspace: uninstalled (app_uninstalled), its bot
// token revoked (tokens_revoked), installed again; sends that Slack refuses for
// good. The envelopes are the shapes Slack sends (test/fixtures/slack/lifecycle-slack.json).
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { tenantRecord } from "../../../runtime/index.ts";
import { handleEvent } from "../../../bridges/slack/ingress.ts";
import { agentExists, rows } from "../../agents.ts";
import { providerRequests, script, settled, waitFor } from "../../support.ts";
import lifecycle from "../../fixtures/slack/lifecycle-slack.json";
import {
  AGENT,
  conversationOf,
  fakeSlackEnv,
  installWorkspace,
  messageEnvelope,
  newTs,
  postEvent,
  rateLimit,
  slackCalls,
  slackId,
  statusFinal,
  threadMessages,
} from "./helpers.ts";

type OutboxRow = { conversation: string; status: string; error: string | null; attempts: number };

function uninstalled(team: string) {
  return { ...structuredClone(lifecycle.appUninstalled), team_id: team, event_id: slackId("Ev") };
}

function revoked(team: string, tokens: { bot?: string[]; oauth?: string[] }) {
  const envelope = { ...structuredClone(lifecycle.tokensRevoked), team_id: team, event_id: slackId("Ev") };
  envelope.event.tokens = tokens as typeof envelope.event.tokens;
  return envelope;
}

const outboxOf = (team: string, conversation: string) =>
  rows<OutboxRow>(team, AGENT, "SELECT conversation, status, error, attempts FROM outbox WHERE conversation = ? ORDER BY id", conversation);

/** A message that starts a thread, scripted so the provider's requests for it can be counted. */
async function ask(team: string, scenario: string): Promise<{ channel: string; ts: string }> {
  const channel = slackId("C");
  const ts = newTs();
  const res = await postEvent(messageEnvelope({ team, channel, ts, text: `hello [s:${scenario}]` }));
  expect(res.status).toBe(200);
  return { channel, ts };
}

describe("Slack app lifecycle", () => {
  it("app_uninstalled deletes the token and fails the unsent replies; no turn runs until a reinstall, which resumes", async () => {
    const team = slackId("T");
    await installWorkspace({ team });
    // The turn's first post is rate-limited for a long while, so its answer is still unsent when the app goes
    // (the answer takes the place of the status message's row when that waits unsent, so one row or two).
    const first = { channel: slackId("C"), ts: newTs() };
    await rateLimit({ method: "chat.postMessage", channel: first.channel, times: 1, retryAfter: 600 });
    await postEvent(messageEnvelope({ team, ...first, text: "before the uninstall" }));
    const conversation = conversationOf(team, first.channel, first.ts);
    await settled(team, AGENT, conversation);
    const waiting = await outboxOf(team, conversation);
    expect(waiting.length).toBeGreaterThan(0);
    expect(waiting.map((r) => r.status)).toEqual(waiting.map(() => "pending"));

    expect((await postEvent(uninstalled(team))).status).toBe(200);
    const failed = await outboxOf(team, conversation);
    expect(failed.map((r) => r.status)).toEqual(failed.map(() => "failed"));
    expect(failed[0]!.error).toBe(`undeliverable: the app was uninstalled in Slack workspace ${team}`);
    expect(await rows(team, AGENT, "SELECT * FROM effects WHERE kind = 'send'")).toEqual([]);
    const stored = await tenantRecord(env, team, "slack-installations");
    expect(stored).toEqual({ tenant: team, withdrawnAt: expect.any(Number) });

    // A message from the uninstalled workspace is acknowledged and dropped: no turn, no provider call.
    const scenario = slackId("uninstalled");
    await script(scenario, [{ text: "never" }]);
    const after = await ask(team, scenario);
    expect(await rows(team, AGENT, "SELECT id FROM conversations WHERE id = ?", conversationOf(team, after.channel, after.ts))).toEqual([]);
    expect(await providerRequests(scenario)).toEqual([]);

    // Installed again: the next message is answered with the new token.
    const token = await installWorkspace({ team });
    const resumed = await ask(team, slackId("resumed"));
    await statusFinal(resumed.channel, "Done.");
    expect((await threadMessages(resumed.channel)).map((r) => r.token)).toEqual([token]);
  });

  it("with OAuth on and no SLACK_BOT_TOKEN, a workspace that never installed the app is acknowledged and nothing runs", async () => {
    const bare = { ...env, SLACK_BOT_TOKEN: undefined } as unknown as Env;
    const team = slackId("T");
    const scenario = slackId("never-installed");
    await script(scenario, [{ text: "never" }]);
    const envelope = messageEnvelope({ team, channel: slackId("C"), ts: newTs(), text: `hello [s:${scenario}]` });
    expect(await handleEvent(bare, envelope, () => {})).toEqual({ ok: true });
    expect(await agentExists(team, AGENT)).toBe(false);
    expect(await providerRequests(scenario)).toEqual([]);
  });

  it("tokens_revoked for the bot withdraws the installation; one for user tokens only, or another bot, changes nothing", async () => {
    const team = slackId("T");
    await installWorkspace({ team });
    expect((await postEvent(revoked(team, { oauth: ["UPERSON1"] }))).status).toBe(200);
    expect((await postEvent(revoked(team, { bot: ["UOTHERBOT"] }))).status).toBe(200);
    const stillThere = await ask(team, slackId("revoked"));
    await statusFinal(stillThere.channel, "Done.");

    expect((await postEvent(revoked(team, { bot: ["UFAKEBOT"], oauth: ["UPERSON1"] }))).status).toBe(200);
    expect(await tenantRecord(env, team, "slack-installations")).toEqual({ tenant: team, withdrawnAt: expect.any(Number) });
    const after = await ask(team, slackId("revoked-after"));
    expect(await rows(team, AGENT, "SELECT id FROM conversations WHERE id = ?", conversationOf(team, after.channel, after.ts))).toEqual([]);
  });

  it("a send Slack refuses for the token (token_revoked) fails at once, never retried", async () => {
    const team = slackId("T");
    const token = await installWorkspace({ team });
    await fetch(`${fakeSlackEnv.FAKE_SLACK_URL}/_control/revoke`, { method: "POST", body: JSON.stringify({ token }) });
    const { channel, ts } = await ask(team, slackId("refused"));
    const conversation = conversationOf(team, channel, ts);
    // The turn's rows are all written once it has ended: the status post and the answer (which takes its place).
    await settled(team, AGENT, conversation);
    const given = await waitFor("every row settled", async () => {
      const outbox = await outboxOf(team, conversation);
      return outbox.length >= 1 && outbox.every((r) => r.status !== "pending") && outbox;
    });
    expect(given.map((r) => [r.status, r.attempts, r.error])).toEqual(given.map(() => ["failed", 1, "chat.postMessage: token_revoked"]));
    // One call per row: the status post, then the answer (posted, as the status message never was).
    expect(await slackCalls(channel)).toHaveLength(given.length);
  });
});

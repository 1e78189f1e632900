// The slash command, approval decisions from buttons, and the Socket Mode
// connector's signed forward route.
import { env } from "cloudflare:workers";
import { describe, expect, it, vi } from "vitest";
import { decisionValue } from "../../../approvals/index.ts";
import { signatureHeaders } from "../../../bridges/shared/signed-request.ts";
import { handleInteraction } from "../../../bridges/slack/ingress.ts";
import { agentExists } from "../../agents.ts";
import { settled, worker } from "../../support.ts";
import slashFixtures from "../../fixtures/slack/slash-commands-slack.json";
import {
  AGENT,
  conversationOf,
  fakeSlackEnv,
  messageEnvelope,
  newTs,
  postCommand,
  postEvent,
  postInteraction,
  responsesTo,
  responseUrl,
  signedPost,
  slackCalls,
  slackId,
  statusFinal,
  threadMessages,
} from "./helpers.ts";

function command(team: string, channel: string, text: string): Record<string, string> {
  return { ...slashFixtures.slashCommandWithArgs, team_id: team, channel_id: channel, command: "/agent", text, trigger_id: slackId("trig") };
}

async function forward(body: unknown, secret = fakeSlackEnv.SLACK_SOCKET_FORWARD_SECRET!): Promise<Response> {
  const raw = JSON.stringify(body);
  return worker("/slack/forward", { method: "POST", headers: { "content-type": "application/json", ...(await signatureHeaders(secret, raw)) }, body: raw });
}

describe("POST /slack/commands", () => {
  it("acks ssl_check without acting: nothing written, nothing sent", async () => {
    // Shaped like a real command, so acting on it would show: a status read reaches (and creates) the object.
    const team = slackId("T");
    const channel = slackId("C");
    const res = await postCommand({ ...command(team, channel, "status"), ssl_check: "1" });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({});
    expect(await agentExists(team, AGENT)).toBe(false);
    expect(await slackCalls(channel)).toEqual([]);
  });

  it("answers help ephemerally, naming the command as the person typed it", async () => {
    // The recorded command is /test-feedback: the help names it, whatever this deployment calls its command.
    const res = await postCommand({ ...slashFixtures.slashCommand, team_id: slackId("T") });
    expect(res.status).toBe(200);
    const body = (await res.json()) as { response_type: string; text: string };
    expect(body.response_type).toBe("ephemeral");
    expect(body.text).toContain(`\`${slashFixtures.slashCommand.command} stop\``);
    const renamed = (await (await postCommand({ ...command(slackId("T"), slackId("C"), "help"), command: "/helper" })).json()) as { text: string };
    expect(renamed.text.startsWith("*/helper* talks to the agent")).toBe(true);
    expect(renamed.text).not.toContain("/agent");
  });

  it("a form without a command name → 400 naming it", async () => {
    const { command: _dropped, ...form } = command(slackId("T"), slackId("C"), "help");
    const res = await postCommand(form);
    expect(res.status).toBe(400);
    expect(await res.json()).toEqual({ error: expect.stringMatching(/command/) });
  });

  it("rejects an unsigned command with 401", async () => {
    const res = await worker("/slack/commands", { method: "POST", headers: { "content-type": "application/x-www-form-urlencoded" }, body: "team_id=T1&text=stop" });
    expect(res.status).toBe(401);
  });

  it("status and compact act on the channel's latest conversation", async () => {
    const team = slackId("T");
    const channel = slackId("C");
    expect(await (await postCommand(command(team, channel, "status"))).json()).toEqual({
      response_type: "ephemeral",
      text: "There is no conversation with the agent in this channel yet.",
    });
    const ts = newTs();
    await postEvent(messageEnvelope({ team, channel, ts, text: "remember the number 42" }));
    await statusFinal(channel, "Done.");
    const status = (await (await postCommand(command(team, channel, "status"))).json()) as { text: string };
    expect(status.text).toMatch(/^Status: idle \(turn 1\)/);
    const compact = (await (await postCommand(command(team, channel, "compact"))).json()) as { text: string };
    expect(compact.text).toBe("Compacting: the earlier messages are summarised into a handover; the latest stay as they are.");
    await expect.poll(async () => (await threadMessages(channel)).map((m) => m.body.markdown_text), { timeout: 15_000 }).toContain(
      "Compacted: 2 messages summarised into a handover.",
    );
  });
});

describe("POST /slack/interactivity", () => {
  async function clickCard(team: string, value: string): Promise<{ status: number; notices: () => Promise<unknown[]> }> {
    const channel = slackId("C");
    const ts = newTs();
    await postEvent(messageEnvelope({ team, channel, ts, text: "start a thread" }));
    await statusFinal(channel, "Done.");
    const responseId = slackId("resp");
    const res = await postInteraction({
      type: "block_actions",
      user: { id: "UPERSON1", team_id: team },
      team: { id: team },
      container: { type: "message", channel_id: channel, message_ts: newTs(), thread_ts: ts },
      response_url: responseUrl(responseId),
      actions: [{ action_id: "antiproton_approve", value, action_ts: newTs() }],
    });
    return { status: res.status, notices: () => responsesTo(responseId) };
  }

  it("an approval button becomes a decision for its hold, answered to the clicker", async () => {
    const team = slackId("T");
    const click = await clickCard(team, decisionValue(team, AGENT, "hold-123", true));
    expect(click.status).toBe(200);
    // No such hold exists: the runtime's answer shows the decision reached the thread's object.
    await expect.poll(click.notices, { timeout: 15_000 }).toEqual([
      { response_type: "ephemeral", replace_original: false, text: "There is no approval with that id." },
    ]);
  });

  it("a decision value bound to another workspace is refused by the object", async () => {
    const team = slackId("T");
    const click = await clickCard(team, decisionValue(slackId("T"), AGENT, "hold-123", true));
    expect(click.status).toBe(200);
    await expect.poll(click.notices, { timeout: 15_000 }).toEqual([
      { response_type: "ephemeral", replace_original: false, text: "Refused: this button belongs to another workspace or agent." },
    ]);
  });

  it("ignores buttons that are not ours: nothing written, nothing sent, nobody told", async () => {
    const team = slackId("T");
    const channel = slackId("C");
    const responseId = slackId("resp");
    const res = await postInteraction({
      type: "block_actions",
      user: { id: "UPERSON1", team_id: team },
      team: { id: team },
      container: { type: "message", channel_id: channel, message_ts: newTs(), thread_ts: newTs() },
      response_url: responseUrl(responseId),
      actions: [{ action_id: "info", value: "x", action_ts: newTs() }],
    });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({});
    expect(await agentExists(team, AGENT)).toBe(false);
    expect(await slackCalls(channel)).toEqual([]);
    expect(await responsesTo(responseId)).toEqual([]);
  });

  it("a response_url post that fails (used up, or unreachable) is logged once and never thrown into waitUntil", async () => {
    const errors = vi.spyOn(console, "error").mockImplementation(() => undefined);
    try {
      const usedUp = slackId("resp");
      for (let i = 0; i < 5; i++) await fetch(responseUrl(usedUp), { method: "POST", body: JSON.stringify({ text: `use ${i}` }) });
      for (const [url, logged] of [
        [responseUrl(usedUp), /^Slack response_url post failed: HTTP 404$/],
        ["http://127.0.0.1:1/response/unreachable", /^Slack response_url post failed: /],
      ] as const) {
        errors.mockClear();
        const team = slackId("T");
        const deferred: Promise<unknown>[] = [];
        const click = {
          type: "block_actions",
          user: { id: "UPERSON1", team_id: team },
          team: { id: team },
          container: { type: "message", channel_id: slackId("C"), message_ts: newTs(), thread_ts: newTs() },
          response_url: url,
          actions: [{ action_id: "antiproton_approve", value: decisionValue(team, AGENT, "hold-404", true), action_ts: newTs() }],
        };
        expect(await handleInteraction(env, click, (work) => deferred.push(work))).toEqual({});
        expect(deferred).toHaveLength(1);
        await expect(deferred[0]).resolves.toBeUndefined();
        expect(errors.mock.calls.map((args) => String(args[0]))).toEqual([expect.stringMatching(logged)]);
        // The URL lets anyone post in the channel for 30 minutes: it is not logged.
        expect(String(errors.mock.calls[0]![0])).not.toContain(url);
      }
    } finally {
      errors.mockRestore();
    }
  });

  it("a payload that is not JSON is a 400, an unsigned one a 401", async () => {
    const res = await signedPost("/slack/interactivity", "payload=%7Bnot-json", "application/x-www-form-urlencoded");
    expect(res.status).toBe(400);
    const unsigned = await worker("/slack/interactivity", { method: "POST", headers: { "content-type": "application/x-www-form-urlencoded" }, body: "payload=%7B%7D" });
    expect(unsigned.status).toBe(401);
  });
});

describe("POST /slack/forward (Socket Mode connector)", () => {
  it("takes a forwarded event into the same ingress", async () => {
    const team = slackId("T");
    const channel = slackId("C");
    const ts = newTs();
    const res = await forward({ kind: "events_api", body: messageEnvelope({ team, channel, ts, text: "via the socket" }) });
    expect(res.status).toBe(200);
    await statusFinal(channel, "Done.");
    expect((await threadMessages(channel)).map((m) => m.body.markdown_text)).toEqual(["ok: via the socket"]);
    expect((await settled(team, AGENT, conversationOf(team, channel, ts))).transcript).toHaveLength(2);
  });

  it("a signed body that is not {kind, body} → 400, not a 500", async () => {
    for (const body of [null, 7, { kind: "nope" }]) expect((await forward(body)).status).toBe(400);
  });

  it("refuses a request not signed with the forward secret", async () => {
    const res = await forward({ kind: "events_api", body: messageEnvelope({ team: "T1", channel: "C1", ts: newTs(), text: "x" }) }, "wrong-secret");
    expect(res.status).toBe(401);
  });
});

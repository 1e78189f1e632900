// The slash command, approval decisions from buttons, and the Socket Mode
// connector's signed forward route.
import { describe, expect, it } from "vitest";
import { decisionValue } from "../../approvals/index.ts";
import { signatureHeaders } from "../../bridges/shared/signed-request.ts";
import { settled, worker } from "../support.ts";
import slashFixtures from "../fixtures/slack/slash-commands-slack.json";
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
  it("acks ssl_check without acting", async () => {
    const res = await postCommand({ ssl_check: "1", token: "t" });
    expect(res.status).toBe(200);
  });

  it("answers help (the recorded command with no argument) ephemerally", async () => {
    const res = await postCommand({ ...slashFixtures.slashCommand, team_id: slackId("T") });
    expect(res.status).toBe(200);
    const body = (await res.json()) as { response_type: string; text: string };
    expect(body.response_type).toBe("ephemeral");
    expect(body.text).toContain("/agent stop");
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
    expect(compact.text).toBe("Compacting 2 messages into a summary.");
    await expect.poll(async () => (await threadMessages(channel)).map((m) => m.body.text), { timeout: 15_000 }).toContain(
      "The conversation so far was compacted into a summary.",
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

  it("ignores buttons that are not ours", async () => {
    const res = await postInteraction({ type: "block_actions", user: { id: "U1", team_id: "T1" }, team: { id: "T1" }, actions: [{ action_id: "info", value: "x" }] });
    expect(res.status).toBe(200);
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
    expect((await threadMessages(channel)).map((m) => m.body.text)).toEqual(["ok: via the socket"]);
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

// Approval cards where the agent works: the card in the Slack thread, a signed
// Slack click that performs the call once and is one row of the audit trail
// however often Slack sends it, and 50 concurrent clicks on one
// hold (a Discord click naming the workspace's tenant is refused).
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { alarmOf, auditOnceAppended } from "../agents.ts";
import { click as discordClick, interact, snowflake } from "../bridges/discord/helpers.ts";
import { AGENT, buttons, conversationOf, isCard, messageEnvelope, newTs, postEvent, responsesTo, slackCalls, slackClick, slackId, threadMessages } from "../bridges/slack/helpers.ts";
import { getConversation, ledgerAppends, script, unique, waitFor } from "../support.ts";

const E = env as unknown as Record<string, string>;

/** A thread whose agent asks for the gated vault__append; resolves with the posted card. */
async function heldInThread(team: string, after: string) {
  const channel = slackId("C");
  const ts = newTs();
  const s = unique("chat");
  const entry = unique("entry");
  await script(s, [{ toolCalls: [{ name: "vault__append", arguments: { entry } }] }, { text: "Waiting for your approval." }, { text: after }]);
  await postEvent(messageEnvelope({ team, channel, ts, text: `[s:${s}] please record ${entry}`, user: "U_ASKER" }));
  const card = await waitFor("the card in the thread", async () => (await slackCalls(channel, "chat.postMessage")).find(isCard));
  return { channel, ts, entry, card, conversation: conversationOf(team, channel, ts) };
}

describe("approval cards in Slack", () => {
  it("hold → card in the thread → an approver's signed click performs it once, updates the card, the agent answers, and the trail has one row by the clicker", async () => {
    const team = "T_APPROVALS";
    const { channel, ts, entry, card, conversation } = await heldInThread(team, "Recorded it, thanks.");
    expect(card.body.thread_ts).toBe(ts);
    expect(card.body.text).toMatch(/Approval needed: vault__append/);
    expect(JSON.stringify(card.body.blocks)).toContain(entry);
    await waitFor("the model's interim answer", async () => (await threadMessages(channel)).some((m) => m.body.markdown_text === "Waiting for your approval."));
    // It reads below the card: a message of its own, not the turn's status message above the card edited into it.
    const interim = (await slackCalls(channel, "chat.postMessage")).find((c) => c.body.markdown_text === "Waiting for your approval.");
    expect(interim!.at).toBeGreaterThanOrEqual(card.at);
    const held = await getConversation(team, AGENT, conversation);
    expect(held.transcript.find((e) => e.role === "tool")!.text).toMatch(/^Held for approval/);
    expect(await ledgerAppends(entry)).toHaveLength(0);
    await waitFor("no alarm while idle with a pending hold", async () => (await alarmOf(team, AGENT)) === null);

    const [approve] = buttons(card);
    const responseId = unique("resp");
    const actionTs = newTs();
    expect((await slackClick(team, channel, ts, card.ts!, approve!.value!, "U_APPROVER", responseId, actionTs)).status).toBe(200);
    // Slack sends the same click again (its answer was slow to arrive): still one decision, one row.
    expect((await slackClick(team, channel, ts, card.ts!, approve!.value!, "U_APPROVER", responseId, actionTs)).status).toBe(200);

    await waitFor("the agent's answer in the thread", async () => (await threadMessages(channel)).some((m) => m.body.markdown_text === "Recorded it, thanks."));
    expect(await ledgerAppends(entry)).toHaveLength(1);
    const update = await waitFor("the card updated in place", async () =>
      (await slackCalls(channel, "chat.update")).find((c) => c.body.ts === card.ts && c.body.text?.includes("Approved and performed")),
    );
    expect(buttons(update)).toEqual([]);
    expect(update.body.text).toContain("U_APPROVER");
    expect(await responsesTo(responseId)).toEqual([expect.objectContaining({ text: "Approved. Performing it now." })]);
    const holdId = (await getConversation(team, AGENT, conversation)).holds[0]!.holdId;
    const rows = (await auditOnceAppended(team, AGENT)).filter((row) => row.subject.includes(conversation));
    expect(rows).toEqual([
      expect.objectContaining({ actor: `slack:${team}:U_APPROVER`, action: "hold.approve", subject: `agents/${AGENT}/conversations/${conversation}/holds/${holdId}` }),
    ]);
    expect(JSON.parse(rows[0]!.after!)).toEqual({ hold: holdId, decision: "approve", state: "approved", tool: "vault__append" });
  });

  it("a click by someone not allowed is refused and nothing is performed", async () => {
    const team = "T_APPROVALS";
    const { channel, ts, entry, card, conversation } = await heldInThread(team, "unused");
    const responseId = unique("resp");
    await slackClick(team, channel, ts, card.ts!, buttons(card)[0]!.value!, "U_STRANGER", responseId);
    await waitFor("the refusal", async () => (await responsesTo(responseId)).some((r) => r.text === "You are not allowed to decide this approval. It is still waiting."));
    expect((await getConversation(team, AGENT, conversation)).holds[0]!.state).toBe("pending");
    expect(await ledgerAppends(entry)).toHaveLength(0);
    // A refused click changed nothing: no row.
    expect((await auditOnceAppended(team, AGENT)).filter((row) => row.subject.includes(conversation))).toEqual([]);
  });
});

describe("a held call's arguments", () => {
  it("are shown with secret values redacted, on the Slack card and in the Card itself", async () => {
    // api__post is held by the http plugin's default policy; the mount's secret is REMOTE_API_TOKEN.
    const canary = E.REMOTE_API_TOKEN!;
    const team = slackId("T");
    const channel = slackId("C");
    const ts = newTs();
    const s = unique("secretargs");
    const args = { url: `${E.FAKE_REMOTE_URL}/orders`, body: { item: "tea" }, headers: { "x-api-key": canary } };
    await script(s, [{ toolCalls: [{ name: "api__post", arguments: args }] }, { text: "Waiting for approval." }]);
    await postEvent(messageEnvelope({ team, channel, ts, text: `[s:${s}] order tea` }));
    const card = await waitFor("the card in the thread", async () => (await slackCalls(channel, "chat.postMessage")).find(isCard));

    const shown = JSON.stringify(card.body);
    expect(shown).toContain("x-api-key");
    expect(shown).toContain("[redacted]");
    expect(shown).not.toContain(canary);
    const [held] = (await getConversation(team, AGENT, conversationOf(team, channel, ts))).holds;
    expect(held!.tool).toBe("api__post");
    // The Card is made from the stored hold: what a console or any other bridge would show.
    expect(JSON.parse(held!.arguments)).toEqual({ ...args, headers: { "x-api-key": "[redacted]" } });
  });
});

describe("concurrent clicks", () => {
  it("50 approve clicks on one hold → one performance; the others are told it was already decided; a Discord click carrying the Slack card's value is refused", async () => {
    const tenant = "T_APPROVALS";
    const { channel, ts, entry, card } = await heldInThread(tenant, "Done.");
    const value = buttons(card)[0]!.value!;
    const slackResponses = Array.from({ length: 50 }, () => unique("resp"));
    // The tenant is the workspace's: a guild's click naming it reaches nothing.
    const approver = { id: "1400000000000000042", username: "dee", global_name: "Dee" };
    const [slackResults, discordResults] = await Promise.all([
      Promise.all(slackResponses.map((r) => slackClick(tenant, channel, ts, card.ts!, value, "U_APPROVER", r))),
      Promise.all(Array.from({ length: 5 }, () => interact(discordClick(snowflake(), value, approver, tenant)))),
    ]);
    expect(slackResults.every((r) => r.status === 200)).toBe(true);
    // Refused at the Discord bridge (a guild id is a snowflake) before it could reach the object, which would refuse it too.
    expect(discordResults.map((r) => r.status)).toEqual(Array(5).fill(400));
    const slackNotices = await waitFor("every Slack clicker to be answered", async () => {
      const all = await Promise.all(slackResponses.map(async (r) => (await responsesTo(r))[0]?.text));
      return all.every((t) => t !== undefined) ? all : undefined;
    });
    expect(slackNotices.filter((t) => t === "Approved. Performing it now.")).toHaveLength(1);
    expect(slackNotices.filter((t) => t?.startsWith("Already decided"))).toHaveLength(49);
    await waitFor("the call to be performed", async () => (await ledgerAppends(entry)).length === 1);
    await waitFor("the agent's answer", async () => (await threadMessages(channel)).some((m) => m.body.markdown_text === "Done."));
    expect(await ledgerAppends(entry)).toHaveLength(1);
  });
});

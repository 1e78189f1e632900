// A person's second message while the agent is still answering the first
// (issue 26, acceptance 4): each agent's strategy, set through the Agents API,
// decides whether it steers the running turn, waits for its own turn, restarts
// the turn, or is refused, and the Slack thread shows which.
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import discordRecorded from "../../fixtures/discord/discord.json";
import { forward, snowflake } from "../../bridges/discord/helpers.ts";
import { getConversation, providerRequests, releaseProvider, script, settled, unique, waitFor, worker } from "../../support.ts";
import { parseSettings, secondMessageFrom } from "../../../runtime/control/index.ts";
import { AGENT, conversationOf, messageEnvelope, newTs, postEvent, slackCalls, slackId, statusFinal, threadMessages } from "../../bridges/slack/helpers.ts";

const ADMIN = { authorization: "Bearer test-admin-token", "content-type": "application/json" };
const QUEUED = "Queued: I'll answer this once I've finished the current answer.";
const REJECTED = "I'm still working on your last message. Send this one again when I'm done.";
const RESTARTED = "Restarted: a new message came in.";

function putStrategy(path: string, body: unknown): Promise<Response> {
  return worker(`/v1/tenants/${path}/second-message`, { method: "PUT", headers: ADMIN, body: JSON.stringify(body) });
}

async function strategyOf(team: string): Promise<{ effective: string; tenant: string | null; agent: string | null }> {
  return (await worker(`/v1/tenants/${team}/agents/${AGENT}/second-message`, { headers: ADMIN })).json();
}

/** The markdown of the thread's replies and notices, in the order Slack took them. */
async function thread(channel: string): Promise<(string | undefined)[]> {
  return (await threadMessages(channel)).map((m) => m.body.markdown_text);
}

/**
 * A workspace whose agent has `strategy` (none set: the default), a first
 * message whose model call is held, and a second message in its thread once
 * that call is out. `steps` script the model; the first must hold.
 */
async function secondWhileWorking(strategy: string | undefined, steps: Parameters<typeof script>[1]) {
  const s = unique("second");
  await script(s, steps);
  const team = slackId("T");
  const channel = slackId("C");
  const ts = newTs();
  if (strategy) expect((await putStrategy(`${team}/agents/${AGENT}`, { strategy })).status).toBe(200);
  await postEvent(messageEnvelope({ team, channel, ts, text: `[s:${s}] write a summary` }));
  await waitFor("the first model call", async () => (await providerRequests(s)).length === 1);
  const second = messageEnvelope({ team, channel, ts: newTs(), thread_ts: ts, text: "make it short" });
  expect((await postEvent(second)).status).toBe(200);
  return { s, team, channel, ts, second, conversation: conversationOf(team, channel, ts) };
}

const userTexts = (request: { body: { messages: { role: string; content: unknown }[] } }) =>
  request.body.messages.filter((m) => m.role === "user").map((m) => JSON.stringify(m.content));

describe("a second message while the agent works, through Slack", () => {
  it("steer (the default): it reaches the model before its next call, in the same turn", async () => {
    const { s, team, channel, conversation } = await secondWhileWorking(undefined, [{ hold: true, text: "first draft" }, { text: "final, with the steer" }]);
    expect(await strategyOf(team)).toMatchObject({ effective: "steer", tenant: null, agent: null });
    await releaseProvider(s);
    await statusFinal(channel, "Done.");
    const requests = await providerRequests(s);
    expect(requests).toHaveLength(2);
    expect(userTexts(requests[1]!).at(-1)).toContain("make it short");
    const view = await getConversation(team, AGENT, conversation);
    expect(view.transcript.find((e) => e.text === "make it short")?.steer).toBe(true);
    // One turn: one answer, no note about the second message.
    expect(await thread(channel)).toEqual(["final, with the steer"]);
  });

  it("queue: the thread is told it waits, and it is answered in a turn of its own after the current answer", async () => {
    const { s, team, channel, conversation } = await secondWhileWorking("queue", [{ hold: true, text: "the summary" }, { text: "the short version" }]);
    try {
      await expect.poll(() => thread(channel), { timeout: 15_000 }).toEqual([QUEUED]);
      // Queued, not steered: while the first turn waits for its model, the message is nowhere in the transcript.
      expect((await getConversation(team, AGENT, conversation)).transcript.map((e) => e.text)).not.toContain("make it short");
    } finally {
      await releaseProvider(s);
    }
    await waitFor("the queued message's turn", async () => (await providerRequests(s)).length === 2);
    const view = await waitFor("both turns answered", async () => {
      const v = await settled(team, AGENT, conversation);
      return v.transcript.at(-1)?.text === "the short version" ? v : undefined;
    });
    // The first turn ended with its own answer before the queued message was read.
    expect(view.transcript.filter((e) => e.role === "user" || e.role === "assistant").map((e) => e.text)).toEqual([
      expect.stringContaining("write a summary"),
      "the summary",
      "make it short",
      "the short version",
    ]);
    expect(view.transcript.find((e) => e.text === "make it short")?.steer).toBeFalsy();
    expect(userTexts((await providerRequests(s))[1]!).at(-1)).toContain("make it short");
    await expect.poll(() => thread(channel), { timeout: 15_000 }).toEqual([QUEUED, "the summary", "the short version"]);
    // Two turns, two status messages, each finished: the first "Done." (a notice came after it, so its answer is a
    // message of its own), the second edited into its answer.
    await expect
      .poll(
        async () => {
          const calls = await slackCalls(channel);
          const finished = (ts: string) => calls.find((c) => c.method === "chat.update" && c.body.ts === ts && (c.body.text?.endsWith("Done.") || c.body.markdown_text !== undefined));
          return calls.filter((c) => c.method === "chat.postMessage" && c.body.blocks).map((c) => finished(c.ts!)?.body.markdown_text ?? finished(c.ts!)?.body.text);
        },
        { timeout: 15_000 },
      )
      .toEqual([expect.stringMatching(/Done\.$/), "the short version"]);
  });

  it("interrupt: the running answer stops, its status says it restarted, and a new turn answers everything said", async () => {
    const { s, team, channel, conversation } = await secondWhileWorking("interrupt", [{ hold: true, text: "too late" }, { text: "the short summary" }]);
    const restarted = await waitFor("the first status restarted", async () => (await slackCalls(channel)).find((c) => c.body.blocks && c.body.text?.endsWith(RESTARTED)));
    expect(restarted.method).toBe("chat.update");
    // The stopped turn's call, still out, comes back: its answer is dropped (the conversation's next call waits for it, see README).
    await releaseProvider(s);
    await waitFor("the new turn's model call", async () => (await providerRequests(s)).length === 2);
    const users = userTexts((await providerRequests(s))[1]!);
    // The new call carries both messages, and the note that the first answer was cut short.
    expect(users.at(-1)).toContain("make it short");
    expect(users.join("\n")).toContain("write a summary");
    expect(users.join("\n")).toContain("before the previous answer was finished");
    const done = await statusFinal(channel, "Done.");
    expect(done.body.ts).not.toBe(restarted.body.ts);
    const view = await settled(team, AGENT, conversation);
    expect(view.transcript.at(-1)?.text).toBe("the short summary");
    expect(view.transcript.map((e) => e.text)).not.toContain("too late");
    expect(await thread(channel)).toEqual(["the short summary"]);
  });

  it("reject: the message is refused with a note in the thread, once however often Slack retries it, and the answer goes on", async () => {
    const { s, team, channel, second, conversation } = await secondWhileWorking("reject", [{ hold: true, text: "the summary" }]);
    try {
      await expect.poll(() => thread(channel), { timeout: 15_000 }).toEqual([REJECTED]);
      expect((await postEvent(second, { "x-slack-retry-num": "1", "x-slack-retry-reason": "http_timeout" })).status).toBe(200);
    } finally {
      await releaseProvider(s);
    }
    await statusFinal(channel, "Done.");
    const view = await settled(team, AGENT, conversation);
    expect(view.transcript.map((e) => e.text)).not.toContain("make it short");
    expect(await providerRequests(s)).toHaveLength(1);
    await expect.poll(() => thread(channel), { timeout: 15_000 }).toEqual([REJECTED, "the summary"]);
  });
});

describe("a second message while the agent works, through Discord", () => {
  const APP = (env as unknown as Record<string, string>).DISCORD_APPLICATION_ID!;
  const channelContents = async (channel: string): Promise<string[]> =>
    ((await (await fetch(`${(env as unknown as Record<string, string>).FAKE_DISCORD_URL}/_control/messages?channel=${channel}`)).json()) as { content: string }[]).map((m) => m.content);

  /** Like secondWhileWorking, in a Discord channel: both messages mention the bot, as a channel message must to reach it. */
  async function discordSecond(strategy: string, steps: Parameters<typeof script>[1]) {
    const s = unique("dsecond");
    await script(s, steps);
    const guild = snowflake();
    const channel = snowflake();
    expect((await putStrategy(`${guild}/agents/${AGENT}`, { strategy })).status).toBe(200);
    const say = (content: string) => forward({ ...discordRecorded.gatewayMention.data, id: snowflake(), guild_id: guild, channel_id: channel, content: `<@${APP}> ${content}` });
    expect((await say(`[s:${s}] write a summary`)).status).toBe(202);
    await waitFor("the first model call", async () => (await providerRequests(s)).length === 1);
    expect((await say("make it short")).status).toBe(202);
    return { s, channel };
  }

  it("queue: the channel is told it waits, then gets both answers", async () => {
    const { s, channel } = await discordSecond("queue", [{ hold: true, text: "the summary" }, { text: "the short version" }]);
    try {
      await waitFor("the queued note", async () => (await channelContents(channel)).some((c) => c.includes(QUEUED)));
    } finally {
      await releaseProvider(s);
    }
    await waitFor("both answers", async () => {
      const contents = await channelContents(channel);
      return contents.includes("the summary") && contents.includes("the short version");
    });
  });

  it("interrupt: the working message says it restarted", async () => {
    const { s, channel } = await discordSecond("interrupt", [{ hold: true, text: "too late" }, { text: "the short summary" }]);
    try {
      await waitFor("the restarted status", async () => (await channelContents(channel)).some((c) => c.includes(RESTARTED)));
    } finally {
      await releaseProvider(s);
    }
    await waitFor("the new answer", async () => (await channelContents(channel)).includes("the short summary"));
  });
});

describe("the second-message strategy through the Agents API", () => {
  it("is validated: a bad value is a 400 that names the field and the value", async () => {
    const team = unique("T2");
    for (const [body, words] of [
      [{ strategy: "later" }, ["strategy", "steer, queue, interrupt, reject", '"later"']],
      [{}, ["strategy"]],
      [{ strategy: "queue", also: 1 }, ["also"]],
    ] as const) {
      const res = await putStrategy(`${team}/agents/${AGENT}`, body);
      expect(res.status).toBe(400);
      const text = ((await res.json()) as { error: string }).error;
      for (const word of words) expect(text).toContain(word);
    }
    expect((await worker(`/v1/tenants/${team}/agents/${AGENT}/second-message`, { method: "PUT", headers: ADMIN, body: "queue" })).status).toBe(400);
    expect(await strategyOf(team)).toMatchObject({ effective: "steer", tenant: null, agent: null });
  });

  it("an agent's own strategy wins over its tenant's, and removing it falls back", async () => {
    const team = unique("T3");
    expect((await putStrategy(team, { strategy: "reject" })).status).toBe(200);
    expect(await strategyOf(team)).toMatchObject({ effective: "reject", tenant: "reject", agent: null });
    expect(await (await putStrategy(`${team}/agents/${AGENT}`, { strategy: "interrupt" })).json()).toMatchObject({ ok: true, strategy: "interrupt" });
    expect(await strategyOf(team)).toMatchObject({ effective: "interrupt", tenant: "reject", agent: "interrupt" });
    expect((await worker(`/v1/tenants/${team}/agents/${AGENT}/second-message`, { method: "DELETE", headers: ADMIN })).status).toBe(200);
    expect(await strategyOf(team)).toMatchObject({ effective: "reject", agent: null });
    expect((await worker(`/v1/tenants/${team}/second-message`, { method: "DELETE", headers: ADMIN })).status).toBe(200);
    expect(await strategyOf(team)).toMatchObject({ effective: "steer", tenant: null });
  });
});

describe("an agent's copy of its settings", () => {
  it("taken before the strategy existed, reads as nothing set: the agent steers", () => {
    const old = parseSettings(JSON.stringify({ version: 3, mounts: { tenant: null, agent: null }, models: { tenant: null, agent: null } }));
    expect(old.secondMessage).toEqual({ tenant: null, agent: null });
    expect(secondMessageFrom(old)).toBe("steer");
    expect(secondMessageFrom({ ...old, secondMessage: { tenant: "queue", agent: null } })).toBe("queue");
  });
});

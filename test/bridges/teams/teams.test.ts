// The Teams bridge against the fake Bot Framework (test/fakes/teams.mjs):
// recorded activities replayed (test/fixtures/teams) with new ids and the
// fake's serviceUrl, each delivered with a token the fake signed as the Bot
// Framework does, and answered through the fake Connector.
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import recorded from "../../fixtures/teams/teams.json";
import channel from "../../fixtures/teams/channel-teams.json";
import { peopleNames } from "../../../runtime/index.ts";
import { agentExists, auditOnceAppended } from "../../agents.ts";
import { getConversation, ledgerAppends, providerRequests, releaseProvider, script, settled, unique, waitFor } from "../../support.ts";
import { AGENT, calls, control, conversationKey, deliver, FAKE, fresh, messagesIn, SERVICE_URL, sign, TENANT } from "./helpers.ts";

type Activity = Record<string, unknown> & { id: string; text?: string; conversation: { id: string } & Record<string, unknown>; from: { id: string; name: string; aadObjectId?: string } };

/** The recorded channel mention, replayed as a new post (a new thread) in the channel, its text followed by `extra`. */
function channelMention(extra: string, base: Activity = recorded.mention as Activity): Activity {
  const id = fresh();
  return { ...base, id, serviceUrl: SERVICE_URL, conversation: { ...base.conversation, id: `19:t${fresh()}@thread.tacv2;messageid=${id}` }, text: `${base.text} ${extra}` };
}

/** The recorded follow-up (no mention) as a reply in the thread `conversation`. */
const replyIn = (conversation: string, text: string): Activity => ({ ...(recorded.followUp as Activity), id: fresh(), serviceUrl: SERVICE_URL, conversation: { ...recorded.followUp.conversation, id: conversation }, text });

/** A 1:1 chat: the recorded mention's person and bot, in a personal conversation (Teams sends no mention there). */
function personal(text: string, conversation = `a:1p${fresh()}`, from: Activity["from"] = recorded.mention.from): Activity {
  return { ...(recorded.mention as Activity), id: fresh(), serviceUrl: SERVICE_URL, from, conversation: { conversationType: "personal", tenantId: TENANT, id: conversation }, text, entities: [] };
}

/** A click on a card's Action.Execute: the adaptiveCard/action invoke Teams sends. */
function invoke(conversation: string, from: Activity["from"], holdDecision: string, cardId: string): Activity {
  const { text: _text, entities: _entities, ...base } = recorded.mention as Activity;
  return { ...base, type: "invoke", name: "adaptiveCard/action", id: fresh(), serviceUrl: SERVICE_URL, from, conversation: { conversationType: "personal", tenantId: TENANT, id: conversation }, replyToId: cardId, value: { action: { type: "Action.Execute", verb: "approve", data: { holdDecision } }, trigger: "manual" } } as Activity;
}

const shown = async (conversation: string) => (await messagesIn(conversation)).map((m) => m.text);

describe("every activity's token", () => {
  it("a missing, forged, expired, other bot's, other issuer's or other serviceUrl's token is 401, as is a channel the key does not endorse; nothing is written", async () => {
    const activity = channelMention("hi");
    const key = await conversationKey(activity.conversation.id);
    const now = Math.floor(Date.now() / 1000);
    const refused = [
      await deliver(activity, { token: null }),
      await deliver(activity, { token: "not.a.jwt" }),
      await deliver(activity, { token: await sign({}, "unpublished") }),
      await deliver(activity, { token: await sign({ exp: now - 301, nbf: now - 3600 }) }),
      await deliver(activity, { token: await sign({ aud: "99999999-2222-3333-4444-555555555555" }) }),
      await deliver(activity, { token: await sign({ iss: "https://sts.windows.net/other/" }) }),
      await deliver(activity, { token: await sign({ serviceurl: "https://smba.trafficmanager.net/amer/elsewhere/" }) }),
      await deliver({ ...activity, channelId: "slack" }),
    ];
    // A signature altered by one character.
    const good = await sign();
    refused.push(await deliver(activity, { token: `${good.slice(0, -4)}${good.slice(-4) === "AAAA" ? "BBBB" : "AAAA"}` }));
    expect(refused.map((r) => r.status)).toEqual(Array(9).fill(401));
    expect((await deliver("{not json")).status).toBe(400);
    expect(await calls(activity.conversation.id)).toEqual([]);
    await expect(getConversation(TENANT, AGENT, key)).rejects.toThrow(/404/);
    expect(await agentExists("99999999-2222-3333-4444-555555555555", AGENT)).toBe(false);
  });
});

describe("recorded channel and group chat activities", () => {
  it("the recorded channel mention is answered in its thread: a status message, updated into the reply; a reply in the thread without a mention is heard", async () => {
    const s = unique("teams");
    await script(s, [{ text: "Hello **there**." }, { text: "second answer" }]);
    const activity = channelMention(`[s:${s}]`);
    const thread = activity.conversation.id;
    const res = await deliver(activity);
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ accepted: true });
    await waitFor("the reply", async () => (await shown(thread)).includes("Hello **there**."));
    const all = await calls(thread);
    const status = all.find((c) => c.method === "POST" && c.activity.type === "message")!;
    expect(status.activity).toMatchObject({ type: "message", textFormat: "markdown", text: "⏳ Working on it…" });
    const reply = all.find((c) => c.method === "PUT" && c.activity.text === "Hello **there**.")!;
    expect(reply.activityId).toBe((await messagesIn(thread))[0]!.id);
    expect(await messagesIn(thread)).toHaveLength(1);
    const key = await conversationKey(thread);
    expect(key).toMatch(/_40thread\.tacv2_3bmessageid_3d/);
    expect((await settled(TENANT, AGENT, key)).transcript[0]!.text).toBe(`Hey [s:${s}]`);
    // The recorded follow-up: a reply in the thread, with no mention.
    expect(await (await deliver(replyIn(thread, "and again"))).json()).toMatchObject({ accepted: true });
    await waitFor("the second reply", async () => (await shown(thread)).includes("second answer"));
    // In another thread, the same words without a mention are not for the bot.
    expect(await (await deliver(replyIn(`19:t${fresh()}@thread.tacv2;messageid=1`, "chatter"))).json()).toEqual({ ignored: "not addressed to the bot" });
  });

  it("the recorded channel mention with its HTML attachment and the recorded group chat mention are each answered; a group chat message without a mention is not heard", async () => {
    const s1 = unique("teams-ch");
    const s2 = unique("teams-group");
    await script(s1, [{ text: "channel answer" }]);
    await script(s2, [{ text: "group answer" }]);
    const inChannel = channelMention(`[s:${s1}]`, channel.mention as Activity);
    const group = { ...recorded.groupMention, id: fresh(), serviceUrl: SERVICE_URL, conversation: { ...recorded.groupMention.conversation, id: `19:g${fresh()}@thread.v2` }, text: `${recorded.groupMention.text} [s:${s2}]` };
    expect((await deliver(inChannel)).status).toBe(200);
    expect((await deliver(group)).status).toBe(200);
    await waitFor("the channel's answer", async () => (await shown(inChannel.conversation.id)).includes("channel answer"));
    await waitFor("the group's answer", async () => (await shown(group.conversation.id)).includes("group answer"));
    // The recorded channel's tenant is its own tenant.
    expect((await settled(channel.mention.conversation.tenantId, AGENT, await conversationKey(inChannel.conversation.id))).transcript[0]!.text).toBe(`Hey [s:${s1}]`);
    const chatter = { ...group, id: fresh(), text: "lunch anyone?", entities: [] };
    expect(await (await deliver(chatter)).json()).toEqual({ ignored: "not addressed to the bot" });
  });

  it("a retried delivery (the same activity id) is one event", async () => {
    const s = unique("teams-retry");
    await script(s, [{ text: "once" }]);
    const activity = channelMention(`[s:${s}]`);
    const answers = await Promise.all([deliver(activity), deliver(activity), deliver(activity)]);
    const bodies = (await Promise.all(answers.map((r) => r.json()))) as { accepted: boolean }[];
    expect(answers.every((r) => r.status === 200)).toBe(true);
    expect(bodies.filter((b) => b.accepted)).toHaveLength(1);
    const key = await conversationKey(activity.conversation.id);
    await settled(TENANT, AGENT, key);
    expect(await providerRequests(s)).toHaveLength(1);
    expect((await getConversation(TENANT, AGENT, key)).transcript.filter((t) => t.role === "user")).toHaveLength(1);
  });

  it("the recorded Action.Submit of another card, install and uninstall are acknowledged, and nothing is asked of the model", async () => {
    const submit = { ...channel.channel_post_action, id: `f:${fresh()}`, serviceUrl: SERVICE_URL };
    expect(await (await deliver(submit)).json()).toEqual({ ignored: "a card's data the bridge did not make" });
    const install = { ...personal(""), type: "installationUpdate", action: "add" };
    expect(await (await deliver(install)).json()).toEqual({ ok: true });
    const uninstall = { ...personal(""), type: "installationUpdate", action: "remove" };
    expect(await (await deliver(uninstall)).json()).toEqual({ ok: true });
  });
});

describe("a 1:1 chat", () => {
  it("a message is written before it is answered; a second message steers the running turn", async () => {
    const s = unique("teams-steer");
    await script(s, [{ hold: true, text: "first answer" }, { text: "steered answer" }]);
    const first = personal(`hi [s:${s}]`);
    const chat = first.conversation.id;
    const key = await conversationKey(chat);
    expect((await deliver(first)).status).toBe(200);
    expect((await getConversation(TENANT, AGENT, key)).transcript[0]).toMatchObject({ role: "user" });
    await waitFor("the model to be asked", async () => (await providerRequests(s)).length === 1);
    expect((await deliver(personal("and in French", chat))).status).toBe(200);
    await releaseProvider(s);
    const view = await waitFor("the steered answer", async () => {
      const v = await getConversation(TENANT, AGENT, key);
      return v.status === "idle" && v.transcript.at(-1)?.text === "steered answer" ? v : undefined;
    });
    expect(view.transcript.some((t) => t.role === "user" && t.steer && t.text.includes("and in French"))).toBe(true);
    await waitFor("the steered answer in the chat", async () => (await shown(chat)).includes("steered answer"));
    // Typing while it worked.
    expect((await calls(chat)).some((c) => c.activity.type === "typing")).toBe(true);
  });

  it("stop ends the running turn and says so", async () => {
    const t = unique("teams-stop");
    await script(t, [{ hold: true, text: "too late" }]);
    const first = personal(`again [s:${t}]`);
    const chat = first.conversation.id;
    const key = await conversationKey(chat);
    expect((await deliver(first)).status).toBe(200);
    await waitFor("the model to be asked", async () => (await providerRequests(t)).length === 1);
    const stop = personal("stop", chat);
    expect(await (await deliver(stop)).json()).toEqual({ accepted: true });
    await waitFor("the stop said", async () => (await shown(chat)).includes("Stopped the running turn."));
    await releaseProvider(t);
    await waitFor("the status stopped", async () => (await shown(chat)).some((m) => m.startsWith("⏹️")));
    expect(await shown(chat)).not.toContain("too late");
    const rows = (await auditOnceAppended(TENANT, AGENT)).filter((row) => row.subject === `agents/${AGENT}/conversations/${key}`);
    expect(rows.map((row) => [row.actor, row.action])).toEqual([[`teams:${TENANT}:${recorded.mention.from.id}`, "conversation.stop"]]);
  });
});

describe("approval cards", () => {
  it("a held call's card is an Adaptive Card; a bystander's click is refused; 30 clicks at once by the asker perform the call once, and the card names them", async () => {
    const s = unique("teams-card");
    const entry = unique("entry");
    await script(s, [{ toolCalls: [{ name: "vault__append", arguments: { entry } }] }, { text: "Waiting for approval." }, { text: "Recorded." }]);
    const asker = { ...channel.mention.from, id: `29:asker${fresh()}` };
    const first = personal(`[s:${s}] record ${entry}`, undefined, asker);
    const chat = first.conversation.id;
    await deliver(first);
    const card = await waitFor("the card", async () => (await messagesIn(chat)).find((m) => m.attachments?.[0]?.content.actions.length));
    const content = card.attachments![0]!.content;
    expect(card.attachments![0]!.contentType).toBe("application/vnd.microsoft.card.adaptive");
    expect(content.body[0]!.text).toMatch(/^Approval needed: vault__append/);
    const [approve, deny] = content.actions;
    expect([approve!.type, approve!.title, deny!.title]).toEqual(["Action.Execute", "Approve", "Deny"]);

    const click = async (from: Activity["from"]) => (await (await deliver(invoke(chat, from, approve!.data.holdDecision, card.id))).json()) as { statusCode: number; type: string; value: unknown };
    const refused = await click({ id: `29:bystander${fresh()}`, name: "Bystander", aadObjectId: crypto.randomUUID() });
    expect(refused).toMatchObject({ statusCode: 200, type: "application/vnd.microsoft.activity.message", value: expect.stringContaining("not allowed") });
    expect(await ledgerAppends(entry)).toHaveLength(0);

    const answers = await Promise.all(Array.from({ length: 30 }, () => click(asker)));
    const decided = answers.filter((a) => a.type === "application/vnd.microsoft.card.adaptive");
    expect(decided).toHaveLength(1);
    expect(JSON.stringify(decided[0]!.value)).toContain("Decided by Malte Ubl");
    expect((decided[0]!.value as { actions: unknown[] }).actions).toEqual([]);
    const done = await waitFor("the card updated to performed", async () => (await messagesIn(chat)).find((m) => m.id === card.id && m.text.includes("Approved and performed")));
    expect(done.text).toContain("Decided by Malte Ubl");
    expect(done.attachments![0]!.content.actions).toEqual([]);
    expect(await ledgerAppends(entry)).toHaveLength(1);
    const key = await conversationKey(chat);
    const actor = `teams:${TENANT}:${asker.aadObjectId}`;
    const rows = (await auditOnceAppended(TENANT, AGENT)).filter((row) => row.subject.startsWith(`agents/${AGENT}/conversations/${key}/`));
    expect(rows.map((row) => [row.actor, row.action])).toEqual([[actor, "hold.approve"]]);
    // The console and the trail name the person as Teams does.
    await waitFor("the name kept", async () => (await peopleNames(env, [actor]))[actor] === "Malte Ubl");
  });
});

describe("Teams' limits", () => {
  it("a 429's Retry-After is waited out: the reply arrives once, after it; the Connector token is asked for once and kept", async () => {
    const s = unique("teams-429");
    await script(s, [{ text: "after the wait" }]);
    const activity = personal(`[s:${s}]`);
    const chat = activity.conversation.id;
    await control("rate-limit", { conversation: chat, times: 1, retryAfter: 2 });
    // The fake counts every token it issued in the run (other files' isolates ask for their own): this turn's are the difference.
    const issued = async () => ((await (await fetch(`${FAKE}/_control/tokens`)).json()) as { issued: number }).issued;
    const before = await issued();
    const started = Date.now();
    await deliver(activity);
    await waitFor("the reply", async () => (await shown(chat)).includes("after the wait"));
    expect(Date.now() - started).toBeGreaterThanOrEqual(2000);
    expect((await calls(chat)).filter((c) => c.status === 429)).toHaveLength(1);
    expect(await messagesIn(chat)).toHaveLength(1);
    // At most one (none when this isolate holds one already), however many sends the wait took.
    expect((await issued()) - before).toBeLessThanOrEqual(1);
  });
});

describe("a send whose answer is lost", () => {
  it("the answer, an update of the status message, is made again and shows once", async () => {
    const s = unique("teams-lost");
    await script(s, [{ text: "said once" }]);
    const activity = personal(`[s:${s}]`);
    const chat = activity.conversation.id;
    await control("hold", { conversation: chat, textIncludes: "said once" });
    await deliver(activity);
    await waitFor("the answer updated again", async () => (await calls(chat)).filter((c) => c.method === "PUT" && c.activity.text === "said once").length >= 2, 20_000);
    await settled(TENANT, AGENT, await conversationKey(chat));
    expect(await shown(chat)).toEqual(["said once"]);
    const updates = (await calls(chat)).filter((c) => c.method === "PUT");
    expect(updates.map((c) => [c.held ?? false, c.status])).toEqual([[true, undefined], [false, 200]]);
  });
});

describe("the bot removed or uninstalled", () => {
  it("removed from a conversation, a 403 gives each send up at once, the console says why, and no notice is tried there", async () => {
    const s = unique("teams-removed");
    await script(s, [{ text: "never seen" }]);
    const activity = personal(`[s:${s}]`);
    const chat = activity.conversation.id;
    const key = await conversationKey(chat);
    await control("remove", { conversation: chat });
    expect((await deliver(activity)).status).toBe(200);
    const view = await waitFor("the conversation's error", async () => {
      const v = await getConversation(TENANT, AGENT, key);
      return v.error ? v : undefined;
    });
    expect(view.error).toContain("Teams answered 403");
    await settled(TENANT, AGENT, key);
    let count = -1;
    while ((await calls(chat)).length !== count) {
      count = (await calls(chat)).length;
      await new Promise((r) => setTimeout(r, 1500));
    }
    const sends = (await calls(chat)).filter((c) => c.activity.type !== "typing");
    expect(sends.map((c) => [c.method, c.status, c.activity.text])).toEqual([
      ["POST", 403, "⏳ Working on it…"],
      ["POST", 403, "never seen"],
    ]);
  });

  it("an uninstall (installationUpdate remove) stops the conversation's running turn", async () => {
    const s = unique("teams-uninstall");
    await script(s, [{ hold: true, text: "too late" }]);
    const activity = personal(`[s:${s}]`);
    const chat = activity.conversation.id;
    const key = await conversationKey(chat);
    await deliver(activity);
    await waitFor("the model to be asked", async () => (await providerRequests(s)).length === 1);
    const uninstall = { ...personal("", chat), type: "installationUpdate", action: "remove" };
    expect(await (await deliver(uninstall)).json()).toEqual({ accepted: true });
    await releaseProvider(s);
    const view = await settled(TENANT, AGENT, key);
    expect(view.transcript.map((t) => t.text)).not.toContain("too late");
  });
});

describe("streamed replies", () => {
  const REPLY = "A reply the model writes slowly, so that Teams shows it while it is written, piece by piece, to the end.";

  it("in a 1:1 chat, Teams' own streaming: updates with rising sequences, then the final message; the reply shows once", async () => {
    const s = unique("teams-stream");
    await script(s, [{ text: REPLY, argumentChunk: 4, chunkDelayMs: 150 }]);
    const activity = personal(`[s:${s}]`);
    const chat = activity.conversation.id;
    await deliver(activity);
    await settled(TENANT, AGENT, await conversationKey(chat));
    const messages = await waitFor("the stream ended", async () => {
      const list = await messagesIn(chat);
      return list.some((m) => m.text === REPLY && m.streaming === false) ? list : undefined;
    });
    expect(messages.filter((m) => m.text.includes("A reply"))).toHaveLength(1);
    const streaming = (await calls(chat)).filter((c) => c.activity.entities?.some((e) => e.type === "streaminfo"));
    const infos = streaming.map((c) => c.activity.entities!.find((e) => e.type === "streaminfo")!);
    expect(streaming.every((c) => c.status >= 200 && c.status < 300)).toBe(true);
    expect(infos[0]).toEqual({ type: "streaminfo", streamType: "streaming", streamSequence: 1 });
    expect(infos.at(-1)).toEqual({ type: "streaminfo", streamType: "final", streamId: messages.find((m) => m.text === REPLY)!.id });
    const updates = infos.slice(1, -1);
    expect(updates.length).toBeGreaterThan(0);
    expect(updates.every((e, i) => e.streamType === "streaming" && e.streamSequence! > (i === 0 ? 1 : updates[i - 1]!.streamSequence!))).toBe(true);
  });

  it("in a channel, where Teams does not stream, one message is posted and updated as it is written", async () => {
    const s = unique("teams-stream-ch");
    await script(s, [{ text: REPLY, argumentChunk: 4, chunkDelayMs: 150 }]);
    const activity = channelMention(`[s:${s}]`);
    const thread = activity.conversation.id;
    await deliver(activity);
    await settled(TENANT, AGENT, await conversationKey(thread));
    await waitFor("the whole reply", async () => (await shown(thread)).includes(REPLY));
    const all = await calls(thread);
    expect(all.some((c) => c.activity.entities?.some((e) => e.type === "streaminfo"))).toBe(false);
    const reply = (await messagesIn(thread)).find((m) => m.text === REPLY)!;
    expect(all.filter((c) => c.method === "PUT" && c.activityId === reply.id).length).toBeGreaterThan(1);
    expect((await shown(thread)).filter((t) => t.includes("A reply"))).toHaveLength(1);
  });
});

describe("the bot's Connector token", () => {
  it("refused (401: it expired early), it is dropped, a new one is asked for, and the reply arrives once", async () => {
    const s = unique("teams-token");
    await script(s, [{ text: "with a new token" }]);
    const tokens = async () => ((await (await fetch(`${FAKE}/_control/tokens`)).json()) as { issued: number }).issued;
    const before = await tokens();
    // Counted over every conversation: a call of an earlier test still on its way may be the first to meet the expired token.
    const refusals = async () => ((await (await fetch(`${FAKE}/_control/calls`)).json()) as { status: number }[]).filter((c) => c.status === 401).length;
    const refusedBefore = await refusals();
    await control("expire-tokens", {});
    const activity = personal(`[s:${s}]`);
    const chat = activity.conversation.id;
    await deliver(activity);
    await waitFor("the reply", async () => (await shown(chat)).includes("with a new token"), 20_000);
    expect(await messagesIn(chat)).toHaveLength(1);
    expect(await refusals()).toBeGreaterThan(refusedBefore);
    expect(await tokens()).toBe(before + 1);
  });
});

// The Google Chat bridge against the fake Chat API (test/fakes/gchat.mjs):
// recorded events replayed under new ids (test/fixtures/gchat), each posted
// with a bearer JWT signed by the fake's Chat key, as Chat sends them.
import { describe, expect, it } from "vitest";
import { env } from "cloudflare:workers";
import recorded from "../../fixtures/gchat/gchat.json";
import dm from "../../fixtures/gchat/dm-gchat.json";
import actions from "../../fixtures/gchat/actions-reactions-gchat.json";
import channel from "../../fixtures/gchat/channel-gchat.json";
import reference from "../../fixtures/gchat/reference-gchat.json";
import { markdownToChat } from "../../../bridges/gchat/text.ts";
import { peopleNames } from "../../../runtime/index.ts";
import { agentExists, auditOnceAppended, rows } from "../../agents.ts";
import { getConversation, ledgerAppends, providerRequests, releaseProvider, script, settled, unique, waitFor, withVars } from "../../support.ts";
import { AGENT, calls, certFetches, chatToken, control, deliver, fresh, grants, messagesIn, replay, TENANT } from "./helpers.ts";

/** The recorded mention in a space (a Workspace add-on's event), in a new space and thread, its text followed by `extra`. */
function mention(extra: string) {
  const space = fresh("S");
  const thread = fresh("M");
  const event = replay(recorded.mention, { AAQAJ9CXYcg: space, kVOtO797ZPI: thread });
  event.chat.messagePayload.message.text += ` ${extra}`;
  return { event, space: `spaces/${space}`, thread: `spaces/${space}/threads/${thread}`, conversation: `space-${space}:${thread}` };
}

/** The recorded DM, in a new DM space, as message `id` saying `text`. */
function direct(text: string, space = fresh("D")) {
  const event = replay(dm.dmMessage, { jLQ7DiAAAAE: space, HpyRFx0N2eY: fresh("M") });
  Object.assign(event.chat.messagePayload.message, { text, argumentText: text });
  return { event, space: `spaces/${space}`, conversation: `space-${space}` };
}

const shown = async (space: string) => (await messagesIn(space)).map((m) => m.shown);

describe("Markdown as Google Chat's formatting", () => {
  it("makes bold *x*, italic _x_, strike-through ~x~, links <url|label> and headings bold; keeps code as written", () => {
    expect(markdownToChat("**bold** __also__ *it* _it_ ~~gone~~ snake_case_name")).toBe("*bold* *also* _it_ _it_ ~gone~ snake_case_name");
    expect(markdownToChat("see [the docs](https://example.com/a?b=1) and [no](javascript:x)")).toBe("see <https://example.com/a?b=1|the docs> and [no](javascript:x)");
    expect(markdownToChat("# Title\n`**a**` **x**")).toBe("*Title*\n`**a**` *x*");
    expect(markdownToChat("```\n**not bold**\n```\nafter **b**")).toBe("```\n**not bold**\n```\nafter *b*");
    expect(markdownToChat("```\nleft **open**")).toBe("```\nleft **open**");
    expect(markdownToChat("a * b * c")).toBe("a * b * c");
  });
});

describe("the endpoint: verified before anything", () => {
  it("no token, a forged, expired, foreign or unknown-key token → 401; nothing written", async () => {
    const { event, space, conversation } = mention("hi");
    const forger = (await crypto.subtle.generateKey({ name: "RSASSA-PKCS1-v1_5", modulusLength: 2048, publicExponent: new Uint8Array([1, 0, 1]), hash: "SHA-256" }, true, ["sign", "verify"])) as CryptoKeyPair;
    const now = Math.floor(Date.now() / 1000);
    const good = await chatToken();
    const tampered = `${good.split(".")[0]}.${btoa(JSON.stringify({ iss: "chat@system.gserviceaccount.com", aud: "123456789012", exp: now + 3600 })).replace(/=+$/, "")}.${good.split(".")[2]}`;
    const refused = [
      null,
      "not-a-jwt",
      tampered,
      await chatToken({}, { key: forger.privateKey }),
      await chatToken({}, { key: forger.privateKey, kid: "another-key" }),
      await chatToken({ iat: now - 7200, exp: now - 3600 }),
      await chatToken({ aud: "999999999999" }),
      await chatToken({ iss: "someone@example.iam.gserviceaccount.com" }),
    ];
    for (const token of refused) expect((await deliver(event, { token })).status).toBe(401);
    expect(await calls(space)).toEqual([]);
    await expect(getConversation(TENANT, AGENT, conversation)).rejects.toThrow(/404/);
    expect((await deliver("{not json")).status).toBe(400);
    // Tokens naming keys Chat does not publish fetch the certificate URL again at most once a minute.
    const fetched = await certFetches();
    for (let i = 0; i < 5; i++) expect((await deliver(event, { token: await chatToken({}, { key: forger.privateKey, kid: `forged-${i}` }) })).status).toBe(401);
    expect((await certFetches()) - fetched).toBeLessThanOrEqual(1);
  });
});

describe("a Workspace add-on's tokens (another issuer)", () => {
  const ADD_ON = "service-123456789012@gcp-sa-gsuiteaddons.iam.gserviceaccount.com";
  const addOnToken = (claims = {}) => chatToken({ iss: "https://accounts.google.com", email: ADD_ON, email_verified: true, ...claims });

  it("must name the add-on's service account (GCHAT_TOKEN_EMAIL), verified; without that setting every request is refused", async () => {
    const { event, space } = mention("hi");
    await withVars({ GCHAT_ISSUER: "https://accounts.google.com", GCHAT_TOKEN_EMAIL: ADD_ON }, async () => {
      // Any Google account can have accounts.google.com sign a token for this audience: its email is its own.
      expect((await deliver(event, { token: await addOnToken({ email: "someone@example.iam.gserviceaccount.com" }) })).status).toBe(401);
      expect((await deliver(event, { token: await addOnToken({ email_verified: false }) })).status).toBe(401);
      expect((await deliver(event, { token: await chatToken() })).status).toBe(401);
    });
    await withVars({ GCHAT_ISSUER: "https://accounts.google.com", GCHAT_TOKEN_EMAIL: "" }, async () => {
      expect((await deliver(event, { token: await addOnToken() })).status).toBe(503);
    });
    expect(await calls(space)).toEqual([]);
    await withVars({ GCHAT_ISSUER: "https://accounts.google.com", GCHAT_TOKEN_EMAIL: ADD_ON }, async () => {
      expect((await deliver(event, { token: await addOnToken() })).status).toBe(200);
    });
  });
});

describe("recorded events", () => {
  it("the recorded mention in a space is answered in its thread: a status message, edited into the reply", async () => {
    const s = unique("gc");
    await script(s, [{ text: "Hello **there**." }]);
    const { event, space, thread, conversation } = mention(`[s:${s}]`);
    const res = await deliver(event);
    expect(res.status).toBe(200);
    await waitFor("the reply, in Chat's formatting", async () => (await shown(space)).includes("Hello *there*."));
    const [status] = await calls(space);
    expect(status).toMatchObject({ method: "POST", query: { messageReplyOption: "REPLY_MESSAGE_FALLBACK_TO_NEW_THREAD", messageId: expect.stringMatching(/^client-[0-9a-f]{40}$/) }, body: { text: "⏳ Working on it…", thread: { name: thread } } });
    const messages = await messagesIn(space);
    expect(messages).toHaveLength(1);
    expect(messages[0]!.thread.name).toBe(thread);
    // The app's mention is not part of what the agent reads.
    expect((await settled(TENANT, AGENT, conversation)).transcript[0]!.text).toBe(`hello [s:${s}]`);
  });

  it("in a space, a message that mentions no app is not heard (Chat sends such only to apps that read every message)", async () => {
    const { event, space, conversation } = mention("just chatting");
    const message = event.chat.messagePayload.message as { annotations?: unknown };
    delete message.annotations;
    expect(await (await deliver(event)).json()).toEqual({});
    await expect(getConversation(TENANT, AGENT, conversation)).rejects.toThrow(/404/);
    expect(await calls(space)).toEqual([]);
  });

  it("the recorded DM is answered in the DM, with no thread; the person's Workspace domain is the tenant", async () => {
    const s = unique("gc-dm");
    await script(s, [{ text: "In the DM." }]);
    const { event, space, conversation } = direct(`Thanks! [s:${s}]`);
    expect((await deliver(event)).status).toBe(200);
    await waitFor("the reply", async () => (await shown(space)).includes("In the DM."));
    expect((await calls(space))[0]!.body.thread).toBeUndefined();
    await settled(TENANT, AGENT, conversation);

    const c = unique("gc-domain");
    await script(c, [{ text: "For the domain." }]);
    const spaceId = fresh("S");
    const thread = fresh("M");
    const inDomain = replay(channel.mention, { AAQAO1heGsE: spaceId, qNpOJCyvVvw: thread });
    inDomain.chat.messagePayload.message.argumentText += ` [s:${c}]`;
    expect((await deliver(inDomain)).status).toBe(200);
    await waitFor("the domain's reply", async () => (await shown(`spaces/${spaceId}`)).includes("For the domain."));
    expect((await settled("gchat-12juw1z", AGENT, `space-${spaceId}:${thread}`)).transcript[0]!.text).toBe(`Hey [s:${c}]`);
  });

  it("a retried delivery (the same message name) is one event", async () => {
    const s = unique("gc-retry");
    await script(s, [{ text: "once" }]);
    const { event, space, conversation } = mention(`[s:${s}]`);
    const answers = await Promise.all([deliver(event), deliver(event), deliver(event)]);
    expect(answers.every((r) => r.status === 200)).toBe(true);
    await settled(TENANT, AGENT, conversation);
    expect(await providerRequests(s)).toHaveLength(1);
    expect((await getConversation(TENANT, AGENT, conversation)).transcript.filter((t) => t.role === "user")).toHaveLength(1);
    await waitFor("the reply", async () => (await shown(space)).includes("once"));
    expect(await messagesIn(space)).toHaveLength(1);
  });

  it("the event is written before it is answered; a second message steers the running turn; /stop ends a turn and says so", async () => {
    const s = unique("gc-steer");
    await script(s, [{ hold: true, text: "first answer" }, { text: "steered answer" }]);
    const { event, space, conversation } = direct(`hi [s:${s}]`);
    expect((await deliver(event)).status).toBe(200);
    expect((await getConversation(TENANT, AGENT, conversation)).transcript[0]).toMatchObject({ role: "user" });
    await waitFor("the model to be asked", async () => (await providerRequests(s)).length === 1);
    expect((await deliver(direct("and in French", space.slice("spaces/".length)).event)).status).toBe(200);
    await releaseProvider(s);
    const view = await waitFor("the steered answer", async () => {
      const v = await getConversation(TENANT, AGENT, conversation);
      return v.status === "idle" && v.transcript.at(-1)?.text === "steered answer" ? v : undefined;
    });
    expect(view.transcript.some((t) => t.role === "user" && t.steer && t.text.includes("and in French"))).toBe(true);
    await waitFor("the steered answer in the space", async () => (await shown(space)).includes("steered answer"));

    const t = unique("gc-stop");
    await script(t, [{ hold: true, text: "never said" }]);
    const second = direct(`go [s:${t}]`);
    await deliver(second.event);
    await waitFor("the model to be asked", async () => (await providerRequests(t)).length === 1);
    const spaceId = second.space.slice("spaces/".length);
    const stop = replay(reference.slashCommand, { jLQ7DiAAAAE: spaceId, Slash0000001: fresh("M") });
    const res = await deliver(stop);
    expect(res.status).toBe(200);
    expect(((await res.json()) as { text: string }).text).toMatch(/stop/i);
    await releaseProvider(t);
    const stopped = await settled(TENANT, AGENT, second.conversation);
    expect(stopped.transcript.map((x) => x.text)).not.toContain("never said");
    await waitFor("the status says stopped", async () => (await shown(second.space)).some((m) => m.startsWith("⏹️")));
  });

  it("a Workspace add-on's app command (appCommandPayload) is a command, answered in the add-on's form", async () => {
    const { event } = direct("/status");
    const { messagePayload, ...chat } = event.chat;
    const res = await deliver({ ...event, chat: { ...chat, appCommandPayload: { ...messagePayload, appCommandMetadata: { appCommandId: 3, appCommandType: "SLASH_COMMAND" } } } });
    const answer = (await res.json()) as { hostAppDataAction: { chatDataAction: { createMessageAction: { message: { text: string } } } } };
    expect(answer.hostAppDataAction.chatDataAction.createMessageAction.message.text).toBe("There is no conversation here yet.");
  });

  it("ADDED_TO_SPACE is greeted; REMOVED_FROM_SPACE is answered and writes nothing", async () => {
    const spaceId = fresh("S");
    const added = await deliver(replay(reference.addedToSpace, { AAQAO1heGsE: spaceId }));
    expect(added.status).toBe(200);
    expect(((await added.json()) as { text: string }).text).toMatch(/Mention me/);
    const removed = await deliver(replay(reference.removedFromSpace, { AAQAO1heGsE: spaceId }));
    expect(await removed.json()).toEqual({});
    expect(await calls(`spaces/${spaceId}`)).toEqual([]);
  });
});

describe("approval cards", () => {
  it("a bystander's click is refused; 30 clicks at once by the asker perform the call once, and the card names them", async () => {
    const s = unique("gc-card");
    const entry = unique("entry");
    await script(s, [{ toolCalls: [{ name: "vault__append", arguments: { entry } }] }, { text: "Waiting for approval." }, { text: "Recorded." }]);
    const spaceId = fresh("S");
    const thread = fresh("M");
    const start = replay(actions.mention, { AAQAO1heGsE: spaceId, A6woZAHrIjs: thread });
    start.chat.messagePayload.message.text += ` [s:${s}] record ${entry}`;
    const space = `spaces/${spaceId}`;
    await deliver(start);
    const card = await waitFor("the card", async () => (await messagesIn(space)).find((m) => m.cardsV2.length > 0 && m.cardsV2[0]!.card.sections[0]!.widgets.some((w) => w.buttonList)));
    expect(card.shown).toMatch(/^Approval needed: vault__append/);
    expect(card.thread.name).toBe(`${space}/threads/${thread}`);
    const [approve, deny] = card.cardsV2[0]!.card.sections[0]!.widgets.find((w) => w.buttonList)!.buttonList!.buttons;
    expect([approve!.text, deny!.text]).toEqual(["Approve", "Deny"]);
    const value = approve!.onClick.action.parameters[0]!.value;

    let second = 0;
    const clickBy = async (user: Record<string, unknown>) => {
      const click = replay(actions.action, { "spaces/AAQAO1heGsE/messages/A6woZAHrIjs.9qQCF6JGUNg": card.name, AAQAO1heGsE: spaceId, A6woZAHrIjs: thread });
      click.chat.user = user as typeof click.chat.user;
      click.chat.eventTime = `2026-01-02T23:32:${String(second++).padStart(2, "0")}.000000Z`;
      click.commonEventObject.parameters = { decision: value } as unknown as typeof click.commonEventObject.parameters;
      const res = await deliver(click);
      return (await res.json()) as { hostAppDataAction?: { chatDataAction: { createMessageAction: { message: { text: string; privateMessageViewer?: { name: string } } } } } };
    };
    const said = (a: Awaited<ReturnType<typeof clickBy>>) => a.hostAppDataAction?.chatDataAction.createMessageAction.message;
    const refused = await clickBy({ name: "users/100000000000000000009", displayName: "Bystander", type: "HUMAN" });
    expect(said(refused)).toMatchObject({ text: expect.stringContaining("not allowed"), privateMessageViewer: { name: "users/100000000000000000009" } });
    // The Chat API's own event form, answered in its form: a private message to the clicker.
    const classic = replay(reference.cardClicked, { "spaces/AAQAO1heGsE/messages/A6woZAHrIjs.9qQCF6JGUNg": card.name, AAQAO1heGsE: spaceId, A6woZAHrIjs: thread });
    classic.user = { ...classic.user, name: "users/100000000000000000008", displayName: "Another Bystander" };
    classic.action.parameters[0]!.value = value;
    classic.common.parameters.decision = value;
    expect(await (await deliver(classic)).json()).toMatchObject({ actionResponse: { type: "NEW_MESSAGE" }, privateMessageViewer: { name: "users/100000000000000000008" }, text: expect.stringContaining("not allowed") });
    expect(await ledgerAppends(entry)).toHaveLength(0);

    const asker = actions.action.chat.user;
    const answers = await Promise.all(Array.from({ length: 30 }, () => clickBy(asker)));
    expect(answers.filter((a) => said(a)?.text === "Approved.")).toHaveLength(1);
    const done = await waitFor("the card updated to performed", async () => (await messagesIn(space)).find((m) => m.name === card.name && m.shown.startsWith("Approved and performed")));
    expect(done.shown).toContain("Decided by Test User");
    expect(done.cardsV2[0]!.card.sections[0]!.widgets.some((w) => w.buttonList)).toBe(false);
    expect(await ledgerAppends(entry)).toHaveLength(1);
    const conversation = `space-${spaceId}:${thread}`;
    const trail = (await auditOnceAppended(TENANT, AGENT)).filter((row) => row.subject.startsWith(`agents/${AGENT}/conversations/${conversation}/`));
    expect(trail.map((row) => [row.actor, row.action])).toEqual([[`gchat:${TENANT}:100000000000000000001`, "hold.approve"]]);
    const actor = `gchat:${TENANT}:100000000000000000001`;
    await waitFor("the name kept", async () => (await peopleNames(env, [actor]))[actor] === "Test User");
  });

  it("a click on a button that is not a card's is answered and nothing is done", async () => {
    const res = await deliver(replay(reference.cardClicked, { AAQAO1heGsE: fresh("S") }));
    expect(await res.json()).toEqual({});
  });
});

describe("Google Chat's limits", () => {
  it("a 429 is waited out: the reply arrives once", async () => {
    const s = unique("gc-429");
    await script(s, [{ text: "after the wait" }]);
    const { event, space } = direct(`[s:${s}]`);
    await control("rate-limit", { space, times: 2 });
    await deliver(event);
    await waitFor("the reply", async () => (await shown(space)).includes("after the wait"));
    expect((await calls(space)).filter((c) => c.status === 429)).toHaveLength(2);
    expect(await shown(space)).toEqual(["after the wait"]);
  });

  it("a create whose answer is lost is made again under the same messageId: Chat's 409 is the message made, shown once", async () => {
    const s = unique("gc-lost");
    await script(s, [{ text: "said once" }]);
    const { event, space, conversation } = direct(`[s:${s}]`);
    await control("hold", { space, textIncludes: "Working on it" });
    const before = await grants();
    await deliver(event);
    await waitFor("the status created again", async () => (await calls(space)).filter((c) => c.method === "POST").length >= 2, 20_000);
    await settled(TENANT, AGENT, conversation);
    await waitFor("the reply", async () => (await shown(space)).includes("said once"));
    const posts = (await calls(space)).filter((c) => c.method === "POST");
    expect(posts.map((c) => [c.held ?? false, c.status ?? null])).toEqual([[true, null], [false, 409]]);
    expect(posts[0]!.query.messageId).toBe(posts[1]!.query.messageId);
    expect(await shown(space)).toEqual(["said once"]);
    expect(await waitFor("the outbox settled", async () => {
      const statuses = (await rows<{ status: string }>(TENANT, AGENT, "SELECT status FROM outbox WHERE conversation = ?", conversation)).map((r) => r.status);
      return statuses.includes("pending") ? undefined : statuses;
    })).toEqual(["sent", "sent"]);
    // The service account's token is cached: no grant per send.
    expect((await grants()) - before).toBeLessThanOrEqual(1);
  });

  it("a space the app was removed from is not written to again: a 403 gives the message up at once, the console says why, and no notice is tried there", async () => {
    const s = unique("gc-removed");
    await script(s, [{ text: "never seen" }]);
    const { event, space, conversation } = direct(`[s:${s}]`);
    await control("remove", { space });
    expect((await deliver(event)).status).toBe(200);
    const view = await waitFor("the conversation's error", async () => {
      const v = await getConversation(TENANT, AGENT, conversation);
      return v.error ? v : undefined;
    });
    expect(view.error).toContain("PERMISSION_DENIED");
    await settled(TENANT, AGENT, conversation);
    // A notice of the failure would follow the turn's end: the space is read once no call has come for 1.5 s.
    let count = -1;
    while ((await calls(space)).length !== count) {
      count = (await calls(space)).length;
      await new Promise((r) => setTimeout(r, 1500));
    }
    expect((await calls(space)).map((c) => [c.method, c.status, c.body.text])).toEqual([
      ["POST", 403, "⏳ Working on it…"],
      ["POST", 403, "never seen"],
    ]);
  });

  it("a long reply is split at 4,096 characters, in order", async () => {
    const s = unique("gc-long");
    const long = Array.from({ length: 120 }, (_, i) => `line ${i} ${"x".repeat(60)}`).join("\n");
    await script(s, [{ text: long }]);
    const { event, space } = direct(`[s:${s}]`);
    await deliver(event);
    const parts = await waitFor("every part", async () => {
      const list = await shown(space);
      return list.some((m) => m.includes("line 119")) && list.some((m) => m.startsWith("✅")) ? list.filter((m) => m.startsWith("line")) : undefined;
    });
    expect(parts.length).toBeGreaterThan(1);
    expect(parts.every((m) => m.length <= 4096)).toBe(true);
    expect(parts.join("\n")).toBe(long);
  });
});

it("no agent is made for a tenant the forged token named", async () => {
  expect(await agentExists("gchat-forged", AGENT)).toBe(false);
});

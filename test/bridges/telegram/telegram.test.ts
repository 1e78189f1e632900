// The Telegram bridge against the fake Bot API (test/fakes/telegram.mjs):
// recorded updates replayed with new ids (test/fixtures/telegram), each
// delivered with its bot's secret_token as Telegram sends it.
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import recorded from "../../fixtures/telegram/telegram.json";
import photoUpdate from "../../fixtures/telegram/photo-telegram.json";
import reference from "../../fixtures/telegram/reference-telegram.json";
import { markdownToHtml } from "../../../bridges/telegram/html.ts";
import { peopleNames } from "../../../runtime/index.ts";
import { agentExists, auditOnceAppended, rows } from "../../agents.ts";
import { chooseModels, getConversation, ledgerAppends, PNG, providerRequests, releaseProvider, script, settled, sharedWithModel, unique, waitFor } from "../../support.ts";
import { AGENT, calls, control, deliver, fresh, messagesIn, performAnswer, secretFor, TENANT } from "./helpers.ts";

type Update = { update_id: number; message?: Record<string, unknown> & { chat: Record<string, unknown>; from: Record<string, unknown> } };

/** A recorded private message, replayed as a new one in a new chat, its text followed by `extra`. */
function privateMessage(extra: string, base: Update = recorded.mention as Update) {
  const chat = fresh();
  const message = base.message!;
  const update = {
    ...base,
    update_id: fresh(),
    message: { ...message, message_id: fresh(), chat: { ...message.chat, id: chat }, from: { ...message.from, id: chat }, ...(message.text !== undefined ? { text: `${message.text} ${extra}` } : {}) },
  };
  return { chat, update };
}

/** The same chat, a later message from the same person. */
function followUp(chat: number, text: string) {
  const message = recorded.followUp.message;
  return { ...recorded.followUp, update_id: fresh(), message: { ...message, message_id: fresh(), chat: { ...message.chat, id: chat }, from: { ...message.from, id: chat }, text } };
}

const shown = async (chat: number) => (await messagesIn(chat)).map((m) => m.text);

describe("Markdown as Telegram's HTML", () => {
  it("escapes &, < and > everywhere, keeps code as written, and makes bold, italic, strike-through, links, headings and code blocks tags", () => {
    expect(markdownToHtml("a < b && c > d")).toBe("a &lt; b &amp;&amp; c &gt; d");
    expect(markdownToHtml("**bold** *it* _it_ ~~gone~~ snake_case_name")).toBe("<b>bold</b> <i>it</i> <i>it</i> <s>gone</s> snake_case_name");
    expect(markdownToHtml("see [the docs](https://example.com/a?b=1&c=2)")).toBe('see <a href="https://example.com/a?b=1&amp;c=2">the docs</a>');
    expect(markdownToHtml("[no](javascript:alert(1))")).toBe("[no](javascript:alert(1))");
    expect(markdownToHtml("# Title\n`a<b>` **x**")).toBe("<b>Title</b>\n<code>a&lt;b&gt;</code> <b>x</b>");
    expect(markdownToHtml("```ts\nif (a < b) **not bold**\n```\nafter")).toBe('<pre><code class="language-ts">if (a &lt; b) **not bold**</code></pre>\nafter');
    // A fence left open (a reply split inside a code block) runs to the end.
    expect(markdownToHtml("```\nx < 1")).toBe("<pre><code>x &lt; 1</code></pre>");
  });
});

describe("the webhook: verified before anything", () => {
  it("a wrong, missing or other bot's secret_token → 401; a bot this deployment does not serve → 404; malformed JSON → 400; nothing written", async () => {
    const { chat, update } = privateMessage("hi");
    expect((await deliver(update, { secret: "0".repeat(64) })).status).toBe(401);
    expect((await deliver(update, { secret: null })).status).toBe(401);
    expect((await deliver(update, { secret: await secretFor("tgbot2") })).status).toBe(401);
    expect((await deliver(update, { secret: await secretFor(TENANT, "another-webhook-secret") })).status).toBe(401);
    expect((await deliver(update, { tenant: "nobot" })).status).toBe(404);
    expect((await deliver("{not json")).status).toBe(400);
    expect(await agentExists("nobot", AGENT)).toBe(false);
    expect(await calls(chat)).toEqual([]);
    await expect(getConversation(TENANT, AGENT, `chat${chat}`)).rejects.toThrow(/404/);
  });
});

describe("recorded private messages", () => {
  it("the recorded mention is answered in its chat: a status message answering it, edited into the reply (HTML)", async () => {
    const s = unique("tg");
    await script(s, [{ text: "Hello **there**, `x < y`." }]);
    const { chat, update } = privateMessage(`[s:${s}]`);
    const res = await deliver(update);
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ accepted: true });
    await waitFor("the reply", async () => (await shown(chat)).includes("Hello there, x < y."));
    const all = await calls(chat);
    const status = all.find((c) => c.method === "sendMessage")!;
    expect(status.params).toMatchObject({ chat_id: String(chat), text: "⏳ Working on it…", reply_parameters: { message_id: update.message.message_id } });
    expect(all.find((c) => c.method === "editMessageText" && c.params.text?.includes("there"))!.params).toMatchObject({ parse_mode: "HTML", text: "Hello <b>there</b>, <code>x &lt; y</code>." });
    expect(await messagesIn(chat)).toHaveLength(1);
    expect((await settled(TENANT, AGENT, `chat${chat}`)).transcript[0]!.text).toContain("hi");
  });

  it("a retried delivery (the same update_id) is one event", async () => {
    const s = unique("tg-retry");
    await script(s, [{ text: "once" }]);
    const { chat, update } = privateMessage(`[s:${s}]`);
    const answers = await Promise.all([deliver(update), deliver(update), deliver(update)]);
    const bodies = (await Promise.all(answers.map((r) => r.json()))) as { accepted: boolean }[];
    expect(answers.every((r) => r.status === 200)).toBe(true);
    expect(bodies.filter((b) => b.accepted)).toHaveLength(1);
    await settled(TENANT, AGENT, `chat${chat}`);
    expect(await providerRequests(s)).toHaveLength(1);
    expect((await getConversation(TENANT, AGENT, `chat${chat}`)).transcript.filter((t) => t.role === "user")).toHaveLength(1);
  });

  it("the update is written before the webhook is answered; a second message steers the running turn", async () => {
    const s = unique("tg-steer");
    await script(s, [{ hold: true, text: "first answer" }, { text: "steered answer" }]);
    const { chat, update } = privateMessage(`[s:${s}]`);
    expect((await deliver(update)).status).toBe(200);
    // Written before the webhook was answered.
    expect((await getConversation(TENANT, AGENT, `chat${chat}`)).transcript[0]).toMatchObject({ role: "user" });
    await waitFor("the model to be asked", async () => (await providerRequests(s)).length === 1);
    expect((await deliver(followUp(chat, "and in French"))).status).toBe(200);
    await releaseProvider(s);
    const view = await waitFor("the steered answer", async () => {
      const v = await getConversation(TENANT, AGENT, `chat${chat}`);
      return v.status === "idle" && v.transcript.at(-1)?.text === "steered answer" ? v : undefined;
    });
    expect(view.transcript.some((t) => t.role === "user" && t.steer && t.text.includes("and in French"))).toBe(true);
    await waitFor("the steered answer in the chat", async () => (await shown(chat)).includes("steered answer"));
  });

  it("the recorded photo reaches a model that takes images; a document's text reaches it as text (getFile, then the file's link)", async () => {
    const tenant = "tgbot2";
    await chooseModels({ [tenant]: "fake-anthropic/claude-sonnet-4-5" });
    const s = unique("tg-photo");
    await script(s, [{ text: "A dot." }]);
    const photos = photoUpdate.message.photo;
    for (const size of photos) await control(`files/${size.file_id}`, { base64: PNG, path: `photos/${size.file_unique_id}.jpg` }, "PUT");
    const chat = fresh();
    const update = { ...photoUpdate, update_id: fresh(), message: { ...photoUpdate.message, chat: { ...photoUpdate.message.chat, id: chat }, caption: `[s:${s}] look` } };
    expect((await deliver(update, { tenant })).status).toBe(200);
    await settled(tenant, AGENT, `chat${chat}`);
    const { parts } = await sharedWithModel(s);
    expect(parts).toContainEqual(expect.objectContaining({ type: "image", source: { type: "base64", media_type: "image/jpeg", data: PNG } }));
    await waitFor("the photo answered", async () => (await shown(chat)).includes("A dot."));

    const d = unique("tg-doc");
    await script(d, [{ text: "Read it." }]);
    const doc = reference.document.message;
    await control(`files/${doc.document.file_id}`, { base64: Buffer.from("the answer is 42").toString("base64"), path: "documents/notes.txt" }, "PUT");
    const docChat = fresh();
    const docUpdate = { ...reference.document, update_id: fresh(), message: { ...doc, chat: { ...doc.chat, id: docChat }, caption: `[s:${d}] ${doc.caption}` } };
    expect((await deliver(docUpdate, { tenant })).status).toBe(200);
    await settled(tenant, AGENT, `chat${docChat}`);
    expect((await sharedWithModel(d)).text).toContain("the answer is 42");
    await waitFor("the document answered", async () => (await shown(docChat)).includes("Read it."));
  });
});

describe("several bots", () => {
  it("each bot is its own tenant: one chat's messages to two bots are two conversations, each answered by its own bot", async () => {
    const s1 = unique("tg-bot1");
    const s2 = unique("tg-bot2");
    await script(s1, [{ text: "from the first bot" }]);
    await script(s2, [{ text: "from the second bot" }]);
    const { chat, update } = privateMessage(`[s:${s1}]`);
    const second = { ...update, message: { ...update.message, text: `@second_test_bot hi [s:${s2}]` } };
    expect((await deliver(update)).status).toBe(200);
    // The same update_id at another bot is another bot's update.
    expect(await (await deliver(second, { tenant: "tgbot2" })).json()).toMatchObject({ accepted: true });
    await waitFor("both replies", async () => (await shown(chat)).length === 2 && (await shown(chat)).every((t) => t.startsWith("from")));
    const answers = (await calls(chat)).filter((c) => c.method === "editMessageText" && c.params.text?.startsWith("from"));
    expect(answers.map((c) => [c.bot, c.params.text]).sort()).toEqual([["second_test_bot", "from the second bot"], ["vercelchatsdkbot", "from the first bot"]]);
    expect((await settled(TENANT, AGENT, `chat${chat}`)).transcript.map((t) => t.text)).not.toContain("from the second bot");
    expect((await settled("tgbot2", AGENT, `chat${chat}`)).transcript.at(-1)!.text).toBe("from the second bot");
  });
});

describe("groups and forum topics", () => {
  const group = (base: { update_id: number; message: Record<string, unknown> }, chat: number, extra = "") => {
    const message = base.message as { text: string; chat: Record<string, unknown> };
    return { ...base, update_id: fresh(), message: { ...message, message_id: fresh(), chat: { ...message.chat, id: chat }, text: `${message.text}${extra}` } };
  };

  it("chatter not addressed to the bot is not heard; a mention and a reply to the bot are, in the group's one conversation", async () => {
    const chat = -fresh();
    const ignored = await deliver(group(reference.groupChatter, chat));
    expect(await ignored.json()).toEqual({ ignored: "not addressed to the bot" });
    const s = unique("tg-group");
    await script(s, [{ text: "noon" }, { text: "noon again" }]);
    expect((await deliver(group(reference.groupMention, chat, ` [s:${s}]`))).status).toBe(200);
    await waitFor("the reply", async () => (await shown(chat)).includes("noon"));
    const view = await settled(TENANT, AGENT, `chat${chat}`);
    expect(view.transcript[0]!.text).toBe(`what time is it? [s:${s}]`);
    expect((await deliver(group(reference.groupReplyToBot, chat))).status).toBe(200);
    await waitFor("the second reply", async () => (await shown(chat)).includes("noon again"));
    expect(JSON.stringify(await getConversation(TENANT, AGENT, `chat${chat}`))).not.toContain("lunch anyone");
  });

  it("a forum topic is its own conversation, answered in its topic", async () => {
    const s = unique("tg-topic");
    await script(s, [{ text: "topic answer" }]);
    const chat = -fresh();
    const update = group(reference.topicMention, chat, ` [s:${s}]`);
    expect((await deliver(update)).status).toBe(200);
    await waitFor("the reply", async () => (await shown(chat)).includes("topic answer"));
    expect((await messagesIn(chat)).every((m) => m.message_thread_id === 77)).toBe(true);
    expect((await settled(TENANT, AGENT, `chat${chat}:77`)).transcript.at(-1)!.text).toBe("topic answer");
    const typing = (await calls(chat)).filter((c) => c.method === "sendChatAction");
    expect(typing[0]?.params).toMatchObject({ action: "typing", message_thread_id: 77 });
  });
});

describe("commands", () => {
  it("/stop (addressed to this bot in a group) ends the running turn and says so", async () => {
    const s = unique("tg-stop");
    await script(s, [{ hold: true, text: "too late" }]);
    const chat = -fresh();
    const mention = reference.groupMention.message;
    await deliver({ update_id: fresh(), message: { ...mention, message_id: fresh(), chat: { ...mention.chat, id: chat }, text: `${mention.text} [s:${s}]` } });
    await waitFor("the model to be asked", async () => (await providerRequests(s)).length === 1);
    const stop = reference.groupCommand.message;
    const res = await deliver({ update_id: fresh(), message: { ...stop, message_id: fresh(), chat: { ...stop.chat, id: chat } } });
    const answer = (await res.json()) as { method: string; text: string; chat_id: number };
    expect(answer).toMatchObject({ method: "sendMessage", chat_id: chat, text: "Stopped the running turn." });
    expect(await performAnswer(answer)).toMatchObject({ ok: true });
    await releaseProvider(s);
    await waitFor("the status stopped", async () => (await shown(chat)).some((t) => t.startsWith("⏹️")));
    expect((await getConversation(TENANT, AGENT, `chat${chat}`)).status).toBe("idle");
    expect(await shown(chat)).not.toContain("too late");
    const rows = (await auditOnceAppended(TENANT, AGENT)).filter((row) => row.subject === `agents/${AGENT}/conversations/chat${chat}`);
    expect(rows.map((row) => [row.actor, row.action])).toEqual([[`telegram:${TENANT}:${mention.from.id}`, "conversation.stop"]]);
  });

  it("/status answers at once; another bot's /stop is not for this one", async () => {
    const { chat, update } = privateMessage("");
    const status = await deliver({ ...update, message: { ...update.message, text: "/status", entities: [{ offset: 0, length: 7, type: "bot_command" }] } });
    const answer = (await status.json()) as { method: string; text: string };
    expect(answer).toMatchObject({ method: "sendMessage", chat_id: chat, text: "There is no conversation here yet." });
    expect(await performAnswer(answer)).toMatchObject({ ok: true });
    const other = -fresh();
    const stop = reference.groupCommand.message;
    const res = await deliver({ update_id: fresh(), message: { ...stop, chat: { ...stop.chat, id: other }, text: "/stop@some_other_bot", entities: [{ offset: 0, length: 20, type: "bot_command" }] } });
    expect(await res.json()).toEqual({ ignored: "not addressed to the bot" });
  });
});

describe("approval cards", () => {
  it("a held call's card is an inline keyboard; a bystander's click is refused; 30 clicks at once by the asker perform the call once, and the card names them", async () => {
    const s = unique("tg-card");
    const entry = unique("entry");
    await script(s, [{ toolCalls: [{ name: "vault__append", arguments: { entry } }] }, { text: "Waiting for approval." }, { text: "Recorded." }]);
    const { chat, update } = privateMessage(`[s:${s}] record ${entry}`);
    await deliver(update);
    const card = await waitFor("the card", async () => (await messagesIn(chat)).find((m) => m.reply_markup?.inline_keyboard.length));
    expect(card.text).toMatch(/^Approval needed: vault__append/);
    const [approve, deny] = card.reply_markup!.inline_keyboard[0]!;
    expect([approve!.text, deny!.text]).toEqual(["Approve", "Deny"]);
    expect(approve!.callback_data).toMatch(/^a:h[0-9a-f]+$/);

    const clickBy = async (from: Record<string, unknown>) => {
      const id = unique("cbq");
      await control("callback-query", { id });
      const query = reference.callbackQuery.callback_query;
      const res = await deliver({ update_id: fresh(), callback_query: { ...query, id, from, message: { ...query.message, message_id: card.message_id, chat: { ...query.message.chat, id: chat } }, data: approve!.callback_data } });
      return (await res.json()) as { method: string; text?: string; show_alert?: boolean };
    };
    const asker = { ...reference.callbackQuery.callback_query.from, id: chat, first_name: "Test", last_name: "User" };
    const refused = await clickBy({ id: fresh(), is_bot: false, first_name: "Bystander" });
    expect(refused).toMatchObject({ method: "answerCallbackQuery", show_alert: true, text: expect.stringContaining("not allowed") });
    expect(await performAnswer(refused)).toMatchObject({ ok: true });
    expect(await ledgerAppends(entry)).toHaveLength(0);

    const answers = await Promise.all(Array.from({ length: 30 }, () => clickBy(asker)));
    expect(answers.filter((a) => a.text === "Approved.")).toHaveLength(1);
    expect(answers.every((a) => a.method === "answerCallbackQuery")).toBe(true);
    for (const answer of answers) expect(await performAnswer(answer)).toMatchObject({ ok: true });
    const done = await waitFor("the card edited to performed", async () => (await messagesIn(chat)).find((m) => m.message_id === card.message_id && m.text.startsWith("Approved and performed")));
    expect(done.text).toContain("Decided by Test User");
    expect(done.reply_markup).toEqual({ inline_keyboard: [] });
    expect(await ledgerAppends(entry)).toHaveLength(1);
    const rows = (await auditOnceAppended(TENANT, AGENT)).filter((row) => row.subject.startsWith(`agents/${AGENT}/conversations/chat${chat}/`));
    expect(rows.map((row) => [row.actor, row.action])).toEqual([[`telegram:${TENANT}:${chat}`, "hold.approve"]]);
    // The console and the trail name the actor as Telegram shows them.
    const actor = `telegram:${TENANT}:${chat}`;
    await waitFor("the name kept", async () => (await peopleNames(env, [actor]))[actor] === "Test User");
  });

  it("a button that is not a card's is answered and nothing is done", async () => {
    const query = reference.callbackQuery.callback_query;
    const res = await deliver({ update_id: fresh(), callback_query: { ...query, data: "something-else" } });
    expect(await res.json()).toEqual({ method: "answerCallbackQuery", callback_query_id: query.id });
  });
});

describe("Telegram's limits", () => {
  it("a 429's retry_after is waited out: the reply arrives once, after it", async () => {
    const s = unique("tg-429");
    await script(s, [{ text: "after the wait" }]);
    const { chat, update } = privateMessage(`[s:${s}]`);
    await control("rate-limit", { chat, times: 1, retryAfter: 2 });
    const started = Date.now();
    await deliver(update);
    await waitFor("the reply", async () => (await shown(chat)).includes("after the wait"));
    expect(Date.now() - started).toBeGreaterThanOrEqual(2000);
    const list = await calls(chat);
    expect(list.filter((c) => c.status === 429)).toHaveLength(1);
    expect(await messagesIn(chat)).toHaveLength(1);
  });

  it("Markdown whose HTML Telegram cannot parse is sent again as plain text, not lost", async () => {
    const s = unique("tg-plain");
    // A link's label opening a bold its text closes: the tags would cross.
    const crossed = "[**a](https://example.com) b**";
    await script(s, [{ text: crossed }]);
    const { chat, update } = privateMessage(`[s:${s}]`);
    await deliver(update);
    await waitFor("the reply", async () => (await shown(chat)).includes(crossed));
    const edits = (await calls(chat)).filter((c) => c.method === "editMessageText");
    expect(edits.map((c) => [c.status, c.params.parse_mode])).toEqual([[400, "HTML"], [200, undefined]]);
  });

  it("a long reply is split at 4,096 characters, in order", async () => {
    const s = unique("tg-long");
    const long = Array.from({ length: 120 }, (_, i) => `line ${i} ${"x".repeat(60)}`).join("\n");
    await script(s, [{ text: long }]);
    const { chat, update } = privateMessage(`[s:${s}]`);
    await deliver(update);
    const messages = await waitFor("every part", async () => {
      const list = await messagesIn(chat);
      return list.some((m) => m.text.includes("line 119")) && list.some((m) => m.text.startsWith("✅")) ? list : undefined;
    });
    const parts = messages.filter((m) => m.text.startsWith("line"));
    expect(parts.length).toBeGreaterThan(1);
    expect(parts.every((m) => m.text.length <= 4096)).toBe(true);
    expect(parts.map((m) => m.text).join("\n")).toBe(long);
  });
});

describe("a person who blocked the bot", () => {
  it("is not sent anything again: a 403 gives the message up at once, the console says why, and no notice is tried there", async () => {
    const s = unique("tg-blocked");
    await script(s, [{ text: "never seen" }]);
    const { chat, update } = privateMessage(`[s:${s}]`);
    await control("block", { chat });
    expect((await deliver(update)).status).toBe(200);
    const view = await waitFor("the conversation's error", async () => {
      const v = await getConversation(TENANT, AGENT, `chat${chat}`);
      return v.error ? v : undefined;
    });
    expect(view.error).toContain("Forbidden: bot was blocked by the user");
    await settled(TENANT, AGENT, `chat${chat}`);
    // A notice of the failure would follow the turn's end: the chat is read once no call has come for 1.5 s.
    let count = -1;
    while ((await calls(chat)).length !== count) {
      count = (await calls(chat)).length;
      await new Promise((r) => setTimeout(r, 1500));
    }
    const sends = (await calls(chat)).filter((c) => c.method !== "sendChatAction");
    // The status and the reply, each refused once (never retried), and no notice of the failure.
    expect(sends.map((c) => [c.method, c.status, c.params.text])).toEqual([
      ["sendMessage", 403, "⏳ Working on it…"],
      ["sendMessage", 403, "never seen"],
    ]);
    expect(await messagesIn(chat)).toEqual([]);
  });
});

describe("a send whose answer is lost", () => {
  it("the answer, an edit of the status message, is made again and shows once", async () => {
    const s = unique("tg-lost");
    await script(s, [{ text: "said once" }]);
    const { chat, update } = privateMessage(`[s:${s}]`);
    await control("hold", { chat, textIncludes: "said once" });
    await deliver(update);
    await waitFor("the answer edited again", async () => (await calls(chat)).filter((c) => c.method === "editMessageText" && c.params.text === "said once").length >= 2, 20_000);
    await settled(TENANT, AGENT, `chat${chat}`);
    expect((await messagesIn(chat)).map((m) => m.text)).toEqual(["said once"]);
    // Telegram's "message is not modified" to the edit made again is the edit done: every row sent, none given up.
    const edits = (await calls(chat)).filter((c) => c.method === "editMessageText");
    expect(edits.map((c) => [c.held ?? false, c.status])).toEqual([[true, undefined], [false, 400]]);
    expect(await waitFor("the outbox settled", async () => {
      const statuses = (await rows<{ status: string }>(TENANT, AGENT, "SELECT status FROM outbox WHERE conversation = ?", `chat${chat}`)).map((r) => r.status);
      return statuses.includes("pending") ? undefined : statuses;
    })).toEqual(["sent", "sent"]);
  });
});

// The Discord bridge against the fake Discord REST server: recorded payloads are
// replayed, each signed here with the test Ed25519 key (PROTOCOLS §4's key).
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import recorded from "../../fixtures/discord/discord.json";
import { decisionValue, parseDecisionValue } from "../../../approvals/index.ts";
import { discordOutbound } from "../../../bridges/discord/outbound.ts";
import { signatureHeaders } from "../../../bridges/shared/signed-request.ts";
import { runInDurableObject } from "cloudflare:test";
import { agent, agentExists, auditOnceAppended } from "../../agents.ts";
import { click, ed25519, forward, interact, now, snowflake } from "./helpers.ts";
import { chooseModels, getConversation, ledgerAppends, providerRequests, releaseProvider, script, settled, sharedWithModel, PNG, unique, waitFor, worker } from "../../support.ts";

const E = env as unknown as Record<string, string>;
const AGENT = "assistant";
const APP = E.DISCORD_APPLICATION_ID!;

// ---- fake Discord -------------------------------------------------------------

interface Button {
  type: number;
  style: number;
  label: string;
  custom_id: string;
}

interface Call {
  method: string;
  kind: "channel" | "webhook";
  messageId?: string;
  responseId?: string;
  status: number;
  body: { content: string; components?: { type: number; components: Button[] }[]; nonce?: string; enforce_nonce?: boolean };
  deduplicated?: boolean;
}

async function calls(filter: { channel?: string; token?: string }): Promise<Call[]> {
  const query = new URLSearchParams(filter as Record<string, string>);
  return (await fetch(`${E.FAKE_DISCORD_URL}/_control/calls?${query}`)).json();
}

async function rateLimit(match: string, retryAfter: number): Promise<void> {
  await fetch(`${E.FAKE_DISCORD_URL}/_control/rate-limit`, { method: "POST", body: JSON.stringify({ match, times: 1, retryAfter }) });
}

/** The messages that exist in the channel (however many calls made them). */
async function messagesIn(channel: string): Promise<{ id: string; content: string }[]> {
  return (await fetch(`${E.FAKE_DISCORD_URL}/_control/messages?channel=${channel}`)).json();
}

/** The next message created in the channel with this text is made, and its answer never comes. */
async function holdCreate(channel: string, textIncludes: string): Promise<void> {
  await fetch(`${E.FAKE_DISCORD_URL}/_control/hold`, { method: "POST", body: JSON.stringify({ channel, textIncludes }) });
}

const posted = (list: Call[]) => list.filter((c) => c.method === "POST" && c.status === 200).map((c) => c.body.content);

/** Waits for the turn's last outbox row (the "done"/"stopped" status edit) to reach Discord. */
function statusEdited(filter: { channel?: string; token?: string }, state: string) {
  return waitFor(`status "${state}"`, async () => {
    const list = await calls(filter);
    return list.some((c) => c.method === "PATCH" && c.status === 200 && c.body.content.includes(state)) ? list : undefined;
  });
}

// ---- payloads -------------------------------------------------------------------

const mention = recorded.gatewayMention.data;

function channelMessage(over: { channel_id: string; guild_id?: string; content: string; id?: string; attachments?: unknown[] }) {
  return { ...mention, id: snowflake(), ...over };
}

function slash(name: string, channelId: string, options: { name: string; type: number; value: string }[] = []) {
  const click = recorded.buttonClickHello;
  return {
    id: snowflake(),
    type: 2,
    application_id: APP,
    token: unique("token"),
    guild_id: click.guild_id,
    channel_id: channelId,
    member: click.member,
    data: { id: "1", name, type: 1, options },
    version: 1,
  };
}

async function ask(channelId: string, text: string) {
  const interaction = slash("ask", channelId, [{ name: "text", type: 3, value: text }]);
  return { interaction, res: await interact(interaction) };
}

const guild = recorded.metadata.guildId;

// ---- 1. verification --------------------------------------------------------------

describe("interactions: verified before anything", () => {
  it("signs like PROTOCOLS §4's frozen vector (so the test key is the one Discord's verifier accepts)", async () => {
    const body = '{"type":1,"id":"1","application_id":"1","token":"t","version":1}';
    expect(await ed25519(`1700000000${body}`)).toBe(
      "44a6918dee4ddf42453b0467f9ba011b07c74b70d0663ae8a7bbde0f8bbf4ded8f913d3abc4df2dda45e49bf9dae631f3bc15be84c24b44ba3c5b6cc090b1c0c",
    );
    expect(E.DISCORD_PUBLIC_KEY).toBe("d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a");
  });

  it("a validly signed PING → PONG", async () => {
    const res = await interact({ type: 1, id: snowflake(), application_id: APP, token: "t", version: 1 });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/^application\/json/);
    expect(await res.json()).toEqual({ type: 1 });
  });

  it("bad or missing signature, stale or missing timestamp → 401; bad JSON 400; wrong type 415; too big 413; nothing written", async () => {
    const channel = snowflake();
    const interaction = slash("ask", channel, [{ name: "text", type: 3, value: "should never run" }]);
    const raw = JSON.stringify(interaction);
    const ts = now();
    const good = await ed25519(ts + raw);
    const flipped = (good[0] === "a" ? "b" : "a") + good.slice(1);
    const stale = String(Math.floor(Date.now() / 1000) - 301);

    expect((await interact(raw, { timestamp: ts, signature: flipped })).status).toBe(401);
    expect((await interact(raw, { signature: null })).status).toBe(401);
    expect((await interact(raw, { timestamp: null, signature: await ed25519(raw) })).status).toBe(401);
    expect((await interact(raw, { timestamp: stale, signature: await ed25519(stale + raw) })).status).toBe(401);
    // Signed for another body: a replayed signature does not carry over.
    expect((await interact(raw.replace("should never run", "something else"), { timestamp: ts, signature: good })).status).toBe(401);
    const malformed = await interact('{"type": 2, ');
    expect(malformed.status).toBe(400);
    expect(await malformed.json()).toMatchObject({ error: expect.stringMatching(/malformed JSON/) });
    expect((await interact(raw, { contentType: "text/plain" })).status).toBe(415);
    expect((await interact({ ...interaction, padding: "x".repeat(70_000) })).status).toBe(413);

    await expect(getConversation(guild, AGENT, channel)).rejects.toThrow(/404/);
    expect(await calls({ channel })).toEqual([]);
    expect(await calls({ token: interaction.token })).toEqual([]);
  });
});

// ---- 2. /ask -----------------------------------------------------------------------

describe("/ask", () => {
  it("defers at once, then the reply reaches the interaction webhook once", async () => {
    const channel = snowflake();
    const { interaction, res } = await ask(channel, "hello there");
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ type: 5 });

    const list = await statusEdited({ token: interaction.token }, "Done.");
    const followUps = list.filter((c) => c.method === "POST");
    expect(followUps).toHaveLength(1);
    expect(followUps[0]!.body.content).toBe("ok: hello there");
    // The deferred "thinking…" became the working state, later edited in place.
    expect(list.filter((c) => c.method === "PATCH").map((c) => [c.messageId === "@original", c.body.content])).toEqual([
      [true, "⏳ Working on it…"],
      [false, "✅ Done."],
    ]);
    expect(await calls({ channel })).toEqual([]);
  });

  it("past the token's 15 minutes the reply goes to the channel as the bot", async () => {
    const channel = snowflake();
    const address = {
      platform: "discord" as const,
      target: { channelId: channel, applicationId: APP, interactionToken: unique("old"), interactionIssuedAt: Date.now() - 16 * 60_000 },
    };
    const route = { tenant: guild, agent: AGENT };
    const result = await discordOutbound.deliver(env, { route, conversation: channel, address, message: { kind: "reply", text: "late" }, idempotencyKey: "k1", createdAt: Date.now() });
    expect(result).toEqual({ ok: true });
    expect(posted(await calls({ channel }))).toEqual(["late"]);
    expect(await calls({ token: address.target.interactionToken })).toEqual([]);
  });

  it("an interaction token Discord no longer accepts falls back to the channel", async () => {
    const channel = snowflake();
    const token = unique("expired");
    await fetch(`${E.FAKE_DISCORD_URL}/_control/expire-token`, { method: "POST", body: JSON.stringify({ token }) });
    const address = { platform: "discord" as const, target: { channelId: channel, applicationId: APP, interactionToken: token, interactionIssuedAt: Date.now() } };
    const route = { tenant: guild, agent: AGENT };
    const result = await discordOutbound.deliver(env, { route, conversation: channel, address, message: { kind: "reply", text: "via bot" }, idempotencyKey: "k2", createdAt: Date.now() });
    expect(result).toEqual({ ok: true });
    expect(posted(await calls({ channel }))).toEqual(["via bot"]);
  });
});

// ---- 3. gateway messages ------------------------------------------------------------


/** Puts a file on the fake Discord's CDN; returns it as a message's `attachments[]` has it. */
async function attach(filename: string, contentType: string, base64: string) {
  const path = `${snowflake()}/${snowflake()}/${filename}`;
  await fetch(`${E.FAKE_DISCORD_URL}/_control/attachments/${path}`, { method: "PUT", body: JSON.stringify({ base64, contentType }) });
  return { id: snowflake(), filename, size: Buffer.from(base64, "base64").length, url: `${E.FAKE_DISCORD_URL}/attachments/${path}?ex=1&is=2&hm=3`, proxy_url: `${E.FAKE_DISCORD_URL}/attachments/${path}`, content_type: contentType };
}

describe("attachments of a gateway message", () => {
  it("a photo reaches a model that takes images as image input, a text file as text; a link off Discord's CDN is named, never fetched; an attachment alone is a message", async () => {
    const tenant = snowflake();
    await chooseModels({ [tenant]: "fake-anthropic/claude-sonnet-4-5" });
    const s = unique("gw-files");
    await script(s, [{ text: "A dot, and the answer." }]);
    const channel = snowflake();
    const photo = await attach("photo.png", "image/png", PNG);
    const notes = await attach("notes.txt", "text/plain; charset=utf-8", Buffer.from("the answer is 42").toString("base64"));
    const elsewhere = { ...photo, filename: "elsewhere.png", url: "http://127.0.0.1:9/elsewhere.png" };
    const res = await forward(channelMessage({ channel_id: channel, guild_id: tenant, content: `<@${APP}> [s:${s}] look`, attachments: [photo, notes, elsewhere] }));
    expect(res.status).toBe(202);
    await settled(tenant, AGENT, channel);
    const { parts, text } = await sharedWithModel(s);
    expect(parts).toContainEqual(expect.objectContaining({ type: "image", source: { type: "base64", media_type: "image/png", data: PNG } }));
    expect(text).toContain("the answer is 42");
    expect(text).toContain("[file elsewhere.png (image/png, 70 bytes), not shown: Discord gave no link to it that the agent may use]");

    const alone = unique("gw-file-alone");
    await script(alone, [{ text: "Got the file." }]);
    const only = await attach(`${alone}.txt`, "text/plain", Buffer.from(`[s:${alone}] only a file`).toString("base64"));
    const second = snowflake();
    expect((await forward(channelMessage({ channel_id: second, guild_id: tenant, content: `<@${APP}>`, attachments: [only] }))).status).toBe(202);
    expect((await settled(tenant, AGENT, second)).transcript.at(-1)!.text).toBe("Got the file.");
  });
});

describe("gateway messages", () => {
  it("a forwarded mention → one reply in the channel; forwarded twice → one turn", async () => {
    const s = unique("gw");
    const channel = snowflake();
    await script(s, [{ text: "Hi from the agent." }]);
    const message = channelMessage({ channel_id: channel, content: `<@${APP}> [s:${s}] Hey` });
    const first = await forward(message);
    expect(first.status).toBe(202);
    expect(await first.json()).toMatchObject({ accepted: true, conversation: channel });
    const again = await forward(message);
    expect(again.status).toBe(200);
    expect(await again.json()).toMatchObject({ accepted: false });

    const list = await statusEdited({ channel }, "Done.");
    expect(posted(list)).toEqual(["⏳ Working on it…", "Hi from the agent."]);
    expect(await providerRequests(s)).toHaveLength(1);
    const view = await settled(guild, AGENT, channel);
    // The bot's mention is not part of what the agent reads.
    expect(view.transcript.map((e) => [e.role, e.text])).toEqual([
      ["user", `[s:${s}] Hey`],
      ["assistant", "Hi from the agent."],
    ]);
  });

  it("replays the recorded duplicate (thread + subscribed delivery of one message) as one turn", async () => {
    const channel = snowflake();
    const id = snowflake();
    const a = await forward({ ...recorded.gatewayThreadUserHey.data, id, channel_id: channel });
    const b = await forward({ ...recorded.gatewaySubscribedMessage.data, id, channel_id: channel });
    expect([a.status, b.status]).toEqual([202, 200]);
    const list = await statusEdited({ channel }, "Done.");
    expect(posted(list)).toEqual(["⏳ Working on it…", "ok: Hey"]);
  });

  it("a bot author (the recorded welcome, by the app itself) → no turn: nothing written, nothing sent", async () => {
    const channel = snowflake();
    const guildId = snowflake();
    const res = await forward({ ...recorded.gatewayBotWelcome.data, id: snowflake(), channel_id: channel, guild_id: guildId });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ ignored: "the author is a bot" });
    expect(await agentExists(guildId, AGENT)).toBe(false);
    expect(await calls({ channel })).toEqual([]);
  });

  it("an unsigned or wrongly signed forward → 401", async () => {
    const body = JSON.stringify(channelMessage({ channel_id: snowflake(), content: "hi" }));
    const unsigned = await worker("/discord/gateway-events", { method: "POST", headers: { "content-type": "application/json" }, body });
    expect(unsigned.status).toBe(401);
    const wrong = await signatureHeaders("not-the-secret", body);
    const forged = await worker("/discord/gateway-events", { method: "POST", headers: { "content-type": "application/json", ...wrong }, body });
    expect(forged.status).toBe(401);
  });

  it("a DM goes to the person's own tenant", async () => {
    const channel = snowflake();
    const res = await forward({ ...recorded.gatewayDMRequest.data, id: snowflake(), channel_id: channel, guild_id: undefined });
    expect(res.status).toBe(202);
    const view = await settled(`dm-${recorded.metadata.userId}`, AGENT, channel);
    expect(view.transcript.map((e) => e.text)).toEqual(["DM me", "ok: DM me"]);
  });
});

// ---- 4. commands ------------------------------------------------------------------

describe("commands", () => {
  it("/stop interrupts the running turn of that channel", async () => {
    const s = unique("stop");
    const channel = snowflake();
    await script(s, [{ hold: true, text: "too late" }]);
    await forward(channelMessage({ channel_id: channel, content: `<@${APP}> [s:${s}] long job` }));
    await waitFor("the model to be asked", async () => (await providerRequests(s)).length === 1);

    const res = await interact(slash("stop", channel));
    expect(await res.json()).toEqual({ type: 4, data: { content: "Stopped the running turn.", allowed_mentions: { parse: [] }, flags: 64 } });
    await releaseProvider(s);
    await statusEdited({ channel }, "Stopped.");
    expect((await getConversation(guild, AGENT, channel)).status).toBe("idle");
    // The notice follows the final status, in order.
    const list = await waitFor("the notice", async () => {
      const all = await calls({ channel });
      return posted(all).length === 2 && all;
    });
    expect(posted(list)).toEqual(["⏳ Working on it…", "The turn was stopped."]);
    const rows = (await auditOnceAppended(guild, AGENT)).filter((row) => row.subject === `agents/${AGENT}/conversations/${channel}`);
    expect(rows.map((row) => [row.actor, row.action])).toEqual([[`discord:${guild}:${starter.id}`, "conversation.stop"]]);
  });

  it("/stop in another channel leaves this one running", async () => {
    const s = unique("other");
    const channel = snowflake();
    await script(s, [{ hold: true, text: "finished" }]);
    await forward(channelMessage({ channel_id: channel, content: `<@${APP}> [s:${s}] work` }));
    await waitFor("the model to be asked", async () => (await providerRequests(s)).length === 1);
    const empty = snowflake();
    const res = await interact(slash("stop", empty));
    expect(await res.json()).toMatchObject({ type: 4, data: { content: "Nothing is running in this conversation." } });
    // A stop where there is no conversation changed nothing: no row.
    expect((await auditOnceAppended(guild, AGENT)).filter((row) => row.subject.includes(empty))).toEqual([]);
    await releaseProvider(s);
    expect(posted(await statusEdited({ channel }, "Done."))).toContain("finished");
  });

  it("/status answers privately; a channel with no conversation gets no row", async () => {
    const empty = snowflake();
    const res = await interact(slash("status", empty));
    expect(await res.json()).toMatchObject({ type: 4, data: { content: "There is no conversation here yet.", flags: 64 } });
    await expect(getConversation(guild, AGENT, empty)).rejects.toThrow(/404/);
    const channel = snowflake();
    await forward(channelMessage({ channel_id: channel, content: `<@${APP}> hello` }));
    await settled(guild, AGENT, channel);
    const status = await interact(slash("status", channel));
    expect(await status.json()).toMatchObject({ type: 4, data: { content: expect.stringMatching(/^Status: idle/), flags: 64 } });
  });
});

// ---- 5. limits -----------------------------------------------------------------------

describe("Discord's limits", () => {
  it("splits at line breaks within 2,000 characters, keeping the text", () => {
    const text = Array.from({ length: 120 }, (_, i) => `line ${i} ${"x".repeat(40)}`).join("\n");
    const parts = discordOutbound.split(text);
    expect(parts.length).toBeGreaterThan(2);
    for (const part of parts) expect(part.length).toBeLessThanOrEqual(2000);
    expect(parts.join("\n")).toBe(text);
    expect(discordOutbound.split("😀".repeat(1500)).every((p) => p.length <= 2000 && !/^[\udc00-\udfff]/.test(p))).toBe(true);
  });

  it("a 429 answers retryAfterMs from retry_after", async () => {
    const channel = snowflake();
    await rateLimit(`/channels/${channel}/`, 2.5);
    const address = { platform: "discord" as const, target: { channelId: channel } };
    const route = { tenant: guild, agent: AGENT };
    const result = await discordOutbound.deliver(env, { route, conversation: channel, address, message: { kind: "reply", text: "x" }, idempotencyKey: "k3", createdAt: Date.now() });
    expect(result).toMatchObject({ ok: false, retryAfterMs: 2500 });
  });

  it("a long reply arrives split and in order, through a 429", async () => {
    const s = unique("long");
    const channel = snowflake();
    const text = Array.from({ length: 100 }, (_, i) => `${String(i).padStart(3, "0")} ${"word ".repeat(10)}`).join("\n");
    await script(s, [{ text }]);
    await rateLimit(`/channels/${channel}/`, 0.2);
    await forward(channelMessage({ channel_id: channel, content: `<@${APP}> [s:${s}] write a lot` }));
    const list = await statusEdited({ channel }, "Done.");
    expect(list[0]!.status).toBe(429);
    const replies = posted(list).slice(1);
    expect(replies.length).toBeGreaterThan(2);
    expect(replies.join("\n")).toBe(text);
    expect(posted(list)[0]).toBe("⏳ Working on it…");
  });
});

describe("a message whose answer is lost", () => {
  it("is sent again after the send timeout with the same enforced nonce, and Discord returns the one it made", async () => {
    const s = unique("nonce");
    const channel = snowflake();
    await script(s, [{ text: "made once" }]);
    await holdCreate(channel, "made once");
    await forward(channelMessage({ channel_id: channel, content: `<@${APP}> [s:${s}] once` }));
    await statusEdited({ channel }, "Done.");

    expect((await messagesIn(channel)).filter((m) => m.content === "made once")).toHaveLength(1);
    const creates = (await calls({ channel })).filter((c) => c.method === "POST" && c.body.content === "made once");
    expect(creates).toHaveLength(2);
    const [first, again] = creates;
    expect(first!.body.nonce).toMatch(/^[0-9a-f]{25}$/);
    expect(again!.body).toMatchObject({ nonce: first!.body.nonce, enforce_nonce: true });
    expect(again!.deduplicated).toBe(true);
  });
});

describe("an object whose state was reset", () => {
  it("posts its next replies as new messages: their nonces are not an earlier life's (row ids start again)", async () => {
    const guild = snowflake();
    const channel = snowflake();
    const [before, after] = [unique("life1"), unique("life2")];
    await script(before, [{ text: "said in the first life" }]);
    await forward(channelMessage({ guild_id: guild, channel_id: channel, content: `<@${APP}> [s:${before}] one` }));
    await statusEdited({ channel }, "Done.");
    await runInDurableObject(agent(guild, AGENT), async (_instance, state) => {
      await state.storage.deleteAll();
      state.abort("state reset by the test");
    }).catch(() => undefined);
    await script(after, [{ text: "said in the second life" }]);
    await forward(channelMessage({ guild_id: guild, channel_id: channel, content: `<@${APP}> [s:${after}] two` }));
    await waitFor("the second life's reply", async () => (await messagesIn(channel)).some((m) => m.content === "said in the second life"));
    expect((await calls({ channel })).filter((c) => c.deduplicated)).toEqual([]);
  });
});

// ---- 6. ids ------------------------------------------------------------------------

describe("ids are checked before they are used", () => {
  const LONE_SURROGATE = "1234\ud800";

  it("a gateway message whose ids are not snowflakes → 400 naming the field; nothing written, nothing sent", async () => {
    const guildId = snowflake();
    const channel = snowflake();
    const good = channelMessage({ guild_id: guildId, channel_id: channel, content: "hello" });
    const bad = [
      { ...good, channel_id: LONE_SURROGATE },
      { ...good, channel_id: "../../users/@me" },
      { ...good, id: LONE_SURROGATE },
      { ...good, author: { ...good.author, id: "12ab" } },
    ];
    for (const message of bad) {
      const res = await forward(message);
      expect(res.status).toBe(400);
      expect(await res.json()).toEqual({ error: expect.stringMatching(/^not a Discord message: .*snowflake/s) });
    }
    expect(await agentExists(guildId, AGENT)).toBe(false);
    expect(await calls({ channel })).toEqual([]);
  });

  it("an interaction whose channel, user or token would not fit a REST path → 400; nothing written, nothing sent", async () => {
    const guildId = snowflake();
    const asked = { ...slash("ask", snowflake(), [{ name: "text", type: 3, value: "hi" }]), guild_id: guildId };
    const bad = [
      { ...asked, channel_id: LONE_SURROGATE },
      { ...asked, member: { ...asked.member, user: { ...asked.member.user, id: LONE_SURROGATE } } },
      { ...asked, token: "abc/../../channels/1/messages" },
      { ...asked, application_id: "app" },
    ];
    for (const interaction of bad) {
      const res = await interact(interaction);
      expect(res.status).toBe(400);
      expect(await res.json()).toEqual({ error: expect.stringMatching(/^not an interaction: /) });
    }
    const click = { ...recorded.buttonClickHello, id: snowflake(), guild_id: guildId, channel_id: LONE_SURROGATE, data: { ...recorded.buttonClickHello.data, custom_id: decisionValue(guildId, AGENT, "h1", true) } };
    expect((await interact(click)).status).toBe(400);
    expect(await agentExists(guildId, AGENT)).toBe(false);
    expect(await calls({ token: asked.token })).toEqual([]);
  });

  it("a stored reply address that is not a Discord channel is given up, never put in a path", async () => {
    const route = { tenant: guild, agent: AGENT };
    const address = { platform: "discord" as const, target: { channelId: "../../users/@me" } };
    const result = await discordOutbound.deliver(env, { route, conversation: "c", address, message: { kind: "reply", text: "x" }, idempotencyKey: "k4", createdAt: Date.now() });
    expect(result).toEqual({ ok: false, error: "reply address is not a Discord channel (or interaction)", permanent: true });
  });
});

// ---- 7. tenancy --------------------------------------------------------------------

describe("routing", () => {
  it("two guilds → two objects", async () => {
    const channel = snowflake();
    const [a, b] = [snowflake(), snowflake()];
    await forward(channelMessage({ guild_id: a, channel_id: channel, content: "from guild a" }));
    await forward(channelMessage({ guild_id: b, channel_id: channel, content: "from guild b" }));
    expect((await settled(a, AGENT, channel)).transcript.map((e) => e.text)).toEqual(["from guild a", "ok: from guild a"]);
    expect((await settled(b, AGENT, channel)).transcript.map((e) => e.text)).toEqual(["from guild b", "ok: from guild b"]);
  });
});

// ---- approval cards -------------------------------------------------------------------

const starter = recorded.buttonClickHello.member.user;
const stranger = { id: "1111111111111111111", username: "mallory", global_name: null };

describe("approval cards", () => {
  it("a held call posts a card with buttons; only someone allowed decides; the card is updated in place, the call performed once, and the trail has one row by the clicker", async () => {
    const s = unique("card");
    const entry = unique("entry");
    const channel = snowflake();
    await script(s, [{ toolCalls: [{ name: "vault__append", arguments: { entry } }] }, { text: "Waiting for approval." }, { text: "Recorded." }]);
    await forward(channelMessage({ channel_id: channel, content: `<@${APP}> [s:${s}] record ${entry}` }));
    const card = await waitFor("the card", async () =>
      (await calls({ channel })).find((c) => c.method === "POST" && c.status === 200 && c.body.components?.length),
    );
    expect(card.body.content).toMatch(/^Approval needed: vault__append/);
    const [approve, deny] = card.body.components![0]!.components;
    expect([approve!.label, approve!.style, deny!.label, deny!.style]).toEqual(["Approve", 3, "Deny", 4]);
    expect(parseDecisionValue(approve!.custom_id)).toMatchObject({ tenant: guild, agent: AGENT, approve: true });

    const refused = await interact(click(channel, approve!.custom_id, stranger));
    expect(await refused.json()).toMatchObject({ type: 4, data: { content: "You are not allowed to decide this approval. It is still waiting.", flags: 64 } });
    expect(await ledgerAppends(entry)).toHaveLength(0);

    const approval = click(channel, approve!.custom_id, starter);
    const approved = await interact(approval);
    // Discord delivers the same interaction again: the same decision, no second row.
    expect((await interact(approval)).status).toBe(200);
    const update = (await approved.json()) as { type: number; data: { content: string; components: unknown[] } };
    expect(update.type).toBe(7);
    expect(update.data.content).toMatch(/^Approved — performing: vault__append/);
    expect(update.data.components).toEqual([]);

    await waitFor("the card edited to performed", async () =>
      (await calls({ channel })).some((c) => c.method === "PATCH" && c.messageId === card.responseId && c.body.content.startsWith("Approved and performed")),
    );
    expect(await ledgerAppends(entry)).toHaveLength(1);
    const rows = (await auditOnceAppended(guild, AGENT)).filter((row) => row.subject.startsWith(`agents/${AGENT}/conversations/${channel}/`));
    expect(rows).toEqual([expect.objectContaining({ actor: `discord:${guild}:${starter.id}`, action: "hold.approve", subject: `agents/${AGENT}/conversations/${channel}/holds/${parseDecisionValue(approve!.custom_id)!.holdId}` })]);
  });

  it("a decision value bound to another guild is refused", async () => {
    const channel = snowflake();
    const res = await interact(click(channel, decisionValue(snowflake(), AGENT, "h1", true), starter));
    expect(await res.json()).toMatchObject({ type: 4, data: { content: "Refused: this button belongs to another workspace or agent.", flags: 64 } });
  });

  it("a button that is not an approval → a silent acknowledgement (type 6): nothing written, nothing sent", async () => {
    const click = { ...recorded.buttonClickGoodbye, id: snowflake(), channel_id: snowflake(), guild_id: snowflake() };
    const res = await interact(click);
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ type: 6 });
    expect(await agentExists(click.guild_id, AGENT)).toBe(false);
    expect(await calls({ channel: click.channel_id })).toEqual([]);
    expect(await calls({ token: click.token })).toEqual([]);
  });
});

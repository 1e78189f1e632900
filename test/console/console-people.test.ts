// People in the console, beyond Slack (test/console/console.test.ts): "Sign in with
// Discord" through the loopback fake of Discord's OAuth2 (test/fakes/discord-oauth.mjs),
// a person in several guilds picking one, the refusals (another state, a code
// Discord refuses), and people shown by the name the directory keeps.
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { peopleNames } from "../../runtime/index.ts";
import { click, interact, snowflake } from "../bridges/discord/helpers.ts";
import { postInteraction, slackId } from "../bridges/slack/helpers.ts";
import { postMessage, unique, waitFor, withVars, worker } from "../support.ts";

const E = env as unknown as Record<string, string>;
const BEARER = { authorization: "Bearer test-admin-token" };
const ORIGIN = "http://antiproton.test";
const AGENT = "clerk";
type Headers = Record<string, string>;

async function grant(tenant: string, identity: string, role: string): Promise<void> {
  const res = await worker(`/v1/tenants/${tenant}/roles/${identity}`, { method: "PUT", headers: { ...BEARER, "content-type": "application/json" }, body: JSON.stringify({ role }) });
  expect(res.status, await res.clone().text()).toBe(200);
}

type DiscordPerson = { id: string; username: string; global_name?: string | null; guilds: { id: string; name: string }[] };

/** Starts a sign-in as the fake's person and follows Discord back: the callback's request, ready to send. */
async function comeBackFromDiscord(person: DiscordPerson): Promise<{ path: string; cookie: string }> {
  expect((await fetch(`${E.DISCORD_SIGN_IN_BASE_URL}/_control/user`, { method: "PUT", body: JSON.stringify(person) })).status).toBe(200);
  const start = await worker("/console/login/discord", { redirect: "manual" });
  expect(start.status).toBe(303);
  const cookie = start.headers.get("set-cookie")!.split(";")[0]!;
  const atDiscord = await fetch(start.headers.get("location")!, { redirect: "manual" });
  expect(atDiscord.status, await atDiscord.clone().text()).toBe(302);
  const back = new URL(atDiscord.headers.get("location")!);
  return { path: `${back.pathname}${back.search}`, cookie };
}

const sessionOf = (res: Response): Headers => ({ cookie: res.headers.getSetCookie().find((c) => c.startsWith("antiproton_console="))!.split(";")[0]! });

async function pageOf(path: string, headers: Headers): Promise<{ status: number; text: string }> {
  const res = await worker(path, { headers, redirect: "manual" });
  return { status: res.status, text: await res.text() };
}

describe("Sign in with Discord", () => {
  it("a member of guild G signs in as discord:<G>:<user>, sees G's conversations and nothing of tenant B", async () => {
    const [g, b, user] = [snowflake(), snowflake(), snowflake()];
    await grant(g, `discord:${g}:${user}`, "admin");
    await postMessage(g, AGENT, { text: "hello", conversation: "seed" });
    await postMessage(b, AGENT, { text: "hello", conversation: "seed" });
    // In B's guild too, but holding no role there: B stays out of reach.
    const back = await comeBackFromDiscord({ id: user, username: "gwen", global_name: "Gwen", guilds: [{ id: g, name: "Guild G" }, { id: b, name: "Guild B" }] });
    const done = await worker(back.path, { headers: { cookie: back.cookie } });
    expect(done.status, await done.clone().text()).toBe(200);
    const me = sessionOf(done);

    expect((await pageOf("/console", me)).text).toContain(`/console/tenants/${g}"`);
    const agentPage = await pageOf(`/console/tenants/${g}/agents/${AGENT}`, me);
    expect(agentPage.status).toBe(200);
    expect(agentPage.text).toContain(`/conversations/seed"`);
    for (const path of [`/console/tenants/${b}`, `/console/tenants/${b}/agents/${AGENT}`, `/console/tenants/${b}/agents/${AGENT}/conversations/seed`]) {
      expect([path, (await pageOf(path, me)).status]).toEqual([path, 404]);
    }
  });

  it("a role taken away is refused at the person's very next request (read from the tenant's own object each time)", async () => {
    const [g, user] = [snowflake(), snowflake()];
    const identity = `discord:${g}:${user}`;
    await grant(g, identity, "member");
    await postMessage(g, AGENT, { text: "hello", conversation: "seed" });
    const back = await comeBackFromDiscord({ id: user, username: "rae", guilds: [{ id: g, name: "Guild G" }] });
    const me = sessionOf(await worker(back.path, { headers: { cookie: back.cookie } }));
    expect((await pageOf(`/console/tenants/${g}/agents/${AGENT}`, me)).status).toBe(200);

    const removed = await worker(`/v1/tenants/${g}/roles/${identity}`, { method: "DELETE", headers: BEARER });
    expect(removed.status, await removed.clone().text()).toBe(200);
    expect((await pageOf(`/console/tenants/${g}/agents/${AGENT}`, me)).status).toBe(404);
    expect((await pageOf("/console", me)).text).not.toContain(`/console/tenants/${g}"`);
  });

  it("a person with roles in two guilds picks one, and acts as that guild's identity only", async () => {
    const [g1, g2, user] = [snowflake(), snowflake(), snowflake()];
    await grant(g1, `discord:${g1}:${user}`, "member");
    await grant(g2, `discord:${g2}:${user}`, "admin");
    const back = await comeBackFromDiscord({ id: user, username: "pat", guilds: [{ id: g1, name: "First" }, { id: g2, name: "Second" }] });
    const asked = await worker(back.path, { headers: { cookie: back.cookie } });
    expect(asked.status).toBe(200);
    const page = await asked.text();
    expect(page).toContain(`value="${g1}"`);
    expect(page).toContain(`value="${g2}"`);
    expect(asked.headers.getSetCookie().some((c) => c.startsWith("antiproton_console="))).toBe(false);
    const choices = asked.headers.getSetCookie().find((c) => c.startsWith("antiproton_console_discord_pick="))!.split(";")[0]!;
    const pick = (guild: string) =>
      worker("/console/login/discord/pick", { method: "POST", headers: { "content-type": "application/x-www-form-urlencoded", origin: ORIGIN, cookie: choices }, body: `guild=${guild}`, redirect: "manual" });

    // A guild that was not offered is refused; one that was opens a session for it alone.
    expect((await pick(snowflake())).status).toBe(400);
    const picked = await pick(g2);
    expect(picked.status, await picked.clone().text()).toBe(200);
    const me = sessionOf(picked);
    expect((await pageOf(`/console/tenants/${g2}`, me)).status).toBe(200);
    expect((await pageOf(`/console/tenants/${g1}`, me)).status).toBe(404);
  });

  it("refuses a callback with another state, a code Discord refuses (used twice), and a person with no role", async () => {
    const [g, user] = [snowflake(), snowflake()];
    await grant(g, `discord:${g}:${user}`, "member");
    const back = await comeBackFromDiscord({ id: user, username: "sam", guilds: [{ id: g, name: "G" }] });
    const forged = new URL(back.path, ORIGIN);
    forged.searchParams.set("state", "someone-elses");
    expect((await worker(`${forged.pathname}${forged.search}`, { headers: { cookie: back.cookie } })).status).toBe(400);
    // The forged attempt did not spend the code: the real callback signs in, a replay of it is refused by Discord.
    expect((await worker(back.path, { headers: { cookie: back.cookie } })).status).toBe(200);
    const replayed = await worker(back.path, { headers: { cookie: back.cookie } });
    expect(replayed.status).toBe(401);
    expect(await replayed.text()).toContain("invalid_grant");

    const nobody = await comeBackFromDiscord({ id: snowflake(), username: unique("nobody"), guilds: [{ id: g, name: "G" }] });
    const refused = await worker(nobody.path, { headers: { cookie: nobody.cookie } });
    expect(refused.status).toBe(403);
    expect(refused.headers.get("set-cookie") ?? "").not.toContain("antiproton_console=");
  });
});

describe("the Discord OAuth2 fake is as strict as Discord", () => {
  it("another client secret is a 401 the console reports; another redirect_uri a 400; the user API wants the bearer", async () => {
    const [g, user] = [snowflake(), snowflake()];
    await grant(g, `discord:${g}:${user}`, "member");
    const person = { id: user, username: "vic", guilds: [{ id: g, name: "G" }] };
    const wrongSecret = await comeBackFromDiscord(person);
    const refused = await withVars({ DISCORD_CLIENT_SECRET: "not-the-secret" }, () => worker(wrongSecret.path, { headers: { cookie: wrongSecret.cookie } }));
    expect(refused.status).toBe(401);
    expect(await refused.text()).toContain("invalid_client");

    const back = await comeBackFromDiscord(person);
    const code = new URL(back.path, ORIGIN).searchParams.get("code")!;
    const exchange = await fetch(`${E.DISCORD_SIGN_IN_BASE_URL}/api/oauth2/token`, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams({ grant_type: "authorization_code", client_id: E.DISCORD_APPLICATION_ID!, client_secret: E.DISCORD_CLIENT_SECRET!, code, redirect_uri: "http://elsewhere.test/callback" }),
    });
    expect([exchange.status, await exchange.json()]).toEqual([400, { error: "invalid_grant", error_description: 'Invalid "redirect_uri" in request.' }]);
    expect((await fetch(`${E.DISCORD_SIGN_IN_BASE_URL}/api/users/@me`)).status).toBe(401);
  });
});

describe("people shown by name", () => {
  it("the audit trail names a signed-in person by the name they signed in with, the id on hover", async () => {
    const [g, user] = [snowflake(), snowflake()];
    const identity = `discord:${g}:${user}`;
    await grant(g, identity, "admin");
    const back = await comeBackFromDiscord({ id: user, username: "gwen_h", global_name: "Gwen Harper", guilds: [{ id: g, name: "G" }] });
    const me = sessionOf(await worker(back.path, { headers: { cookie: back.cookie } }));
    const tenantPage = `/console/tenants/${g}`;
    const form = await pageOf(tenantPage, me);
    const token = /<form method="post" action="\/console\/tenants\/\d+\/limits"[^]*?name="_token" value="([^"]+)"/.exec(form.text)![1]!;
    const set = await worker(`${tenantPage}/limits`, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded", origin: ORIGIN, ...me },
      body: new URLSearchParams({ _token: token, dailyUsd: "2" }).toString(),
      redirect: "manual",
    });
    expect(set.status, await set.clone().text()).toBe(303);

    const shown = (await pageOf(tenantPage, me)).text;
    expect(shown).toContain(`<b class="actor"><span class="person" title="${identity}">Gwen Harper</span></b>`);
    expect(shown).not.toContain(`>${identity}</span>`);
  });

  it("a Discord click keeps the name its payload carries for discord:<guild>:<user>", async () => {
    const [g, channel, user] = [snowflake(), snowflake(), snowflake()];
    const res = await interact(click(channel, "another-apps-button", { id: user, username: "nell_u", global_name: "Nell" }, g));
    expect(res.status).toBe(200);
    await waitFor("the name kept", async () => (await peopleNames(env, [`discord:${g}:${user}`]))[`discord:${g}:${user}`] === "Nell");
  });

  it("a Slack click keeps the name its block_actions payload carries for slack:<team>:<user>", async () => {
    const [team, user] = [slackId("T"), slackId("U")];
    // Another app's button: nothing is done, but the payload still names the person.
    const res = await postInteraction({ type: "block_actions", user: { id: user, team_id: team, name: "ann.b", username: "ann.b" }, team: { id: team }, actions: [{ action_id: "not-ours", value: "x" }] });
    expect(res.status).toBe(200);
    await waitFor("the name kept", async () => (await peopleNames(env, [`slack:${team}:${user}`]))[`slack:${team}:${user}`] === "ann.b");
  });
});

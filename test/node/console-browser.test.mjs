// The console in a real browser (Debian's chromium driven by playwright-core)
// against `wrangler dev` on loopback and the fake model provider: sign in, find
// the tenant and agent in the lists, start a conversation, watch the reply
// arrive without a reload, send a message whose tool call is held, approve its
// card, watch it performed. Then people: sign in with Slack (the loopback fake
// of its OpenID Connect endpoints) as a tenant admin and as a member of
// workspace A, each seeing what their role allows and nothing of workspace B;
// and sign in with Discord (its OAuth2 fake) as a member of a guild.
// Screenshots go to test/node/output/console/ (git-ignored).
import assert from "node:assert/strict";
import { existsSync, mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { chromium } from "playwright-core";
import { onlyProviderVars, startModelProvider } from "../fakes/model-provider.mjs";
import { FAKE_SLACK_CLIENT_ID, FAKE_SLACK_CLIENT_SECRET } from "../fakes/slack.mjs";
import { startSlackOidc } from "../fakes/slack-oidc.mjs";
import { DISCORD_APPLICATION_ID } from "../fakes/discord.mjs";
import { FAKE_DISCORD_CLIENT_SECRET, startDiscordOAuth } from "../fakes/discord-oauth.mjs";
import { startWorker } from "./wrangler-dev.mjs";

const ROOT = new URL("../..", import.meta.url).pathname;
const OUTPUT = join(ROOT, "test/node/output/console");
const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";
const TOKEN = "browser-test-admin-token";
const TENANT = "acme";
const AGENT = "helper";
const SCENARIO = "browser";
/** How long the browser waits for something to appear on the page. */
const SEEN_MS = 15_000;

let provider;
let slackOidc;
let discordOAuth;
let worker;
let context;
let userDataDir;

async function providerControl(path, init) {
  const res = await fetch(`${provider.url}/_control/scenarios/${path}`, init);
  assert.equal(res.ok, true, `fake provider ${path}: ${res.status}`);
}

before(async () => {
  assert.ok(existsSync(CHROMIUM), `no browser at ${CHROMIUM}: apt-get install -y chromium (or set CHROMIUM_PATH)`);
  mkdirSync(OUTPUT, { recursive: true });
  provider = await startModelProvider();
  slackOidc = await startSlackOidc();
  discordOAuth = await startDiscordOAuth();
  worker = await startWorker({
    cwd: ROOT,
    vars: {
      ADMIN_TOKEN: TOKEN,
      ...onlyProviderVars(provider),
      // Remembering a note waits for a person; the console may decide for this tenant.
      MOUNTS: JSON.stringify([{ alias: "notes", plugin: "memory", policy: { write: "approval" } }]),
      APPROVERS: JSON.stringify({ [TENANT]: ["console:admin"] }),
      // "Sign in with Slack", against the fake.
      SLACK_CLIENT_ID: FAKE_SLACK_CLIENT_ID,
      SLACK_CLIENT_SECRET: FAKE_SLACK_CLIENT_SECRET,
      SLACK_SIGN_IN_BASE_URL: slackOidc.url,
      // "Sign in with Discord", against its fake.
      DISCORD_APPLICATION_ID,
      DISCORD_CLIENT_SECRET: FAKE_DISCORD_CLIENT_SECRET,
      DISCORD_SIGN_IN_BASE_URL: discordOAuth.url,
    },
  });
  // A fresh profile each run (playwright passes it as --user-data-dir).
  userDataDir = mkdtempSync(join(tmpdir(), "antiproton-chromium-"));
  context = await chromium.launchPersistentContext(userDataDir, {
    executablePath: CHROMIUM,
    // A zone other than the server's UTC, to see times shown in the reader's zone.
    timezoneId: "Europe/Berlin",
    locale: "en-GB",
    args: [
      "--headless",
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
    ],
  });
});

after(async () => {
  await context?.close();
  await worker?.stop();
  await provider?.close();
  await slackOidc?.close();
  await discordOAuth?.close();
  if (userDataDir) rmSync(userDataDir, { recursive: true, force: true });
});

test("sign in, find the agent, talk to it live, approve its held call", async () => {
  // The agent exists (and is in the directory) once it has taken an event.
  const seeded = await fetch(`${worker.url}/v1/tenants/${TENANT}/agents/${AGENT}/messages`, {
    method: "POST",
    headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" },
    body: JSON.stringify({ text: "hello", conversation: "seed" }),
  });
  assert.equal(seeded.status, 202);
  // Each model answer waits for the test to release it, so it arrives after the page is open.
  await providerControl(SCENARIO, {
    method: "PUT",
    body: JSON.stringify({
      steps: [
        { hold: true, text: "**Hello** from the fake model.\n\n- it renders *Markdown*\n- and <script>this stays text</script>" },
        { hold: true, toolCalls: [{ name: "notes__remember", arguments: { key: "colour", text: "teal" } }] },
        { text: "I have asked for approval to remember that." },
        { text: "Remembered: your colour is teal." },
      ],
    }),
  });

  const page = await context.newPage();
  try {
    await walkThrough(page);
  } catch (err) {
    await page.screenshot({ path: join(OUTPUT, "failure.png"), fullPage: true }).catch(() => undefined);
    throw err;
  }
});

async function walkThrough(page) {
  const problems = [];
  page.on("pageerror", (err) => problems.push(`page error: ${err.message}`));
  // A CSP refusal (of our own script or style, or of anything injected) is logged as a console error.
  page.on("console", (msg) => {
    if (msg.type() === "error" && !msg.location().url.endsWith("/favicon.ico")) problems.push(`console error: ${msg.text()}`);
  });
  const shot = (name) => page.screenshot({ path: join(OUTPUT, `${name}.png`), fullPage: true });
  page.setDefaultTimeout(SEEN_MS);
  const live = page.locator("[data-live]");
  /** Marks the loaded document; a reload or navigation would lose it. */
  const markDocument = () => page.evaluate(() => void (window.__sameDocument = true));
  const sameDocument = () => page.evaluate(() => window.__sameDocument === true);

  await page.goto(`${worker.url}/console`);
  assert.match(page.url(), /\/console\/login$/);
  await page.fill('input[name="token"]', TOKEN);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.waitForURL(/\/console$/);

  // Find the tenant and the agent from the lists.
  await page.locator("table.tenants").getByRole("link", { name: TENANT }).waitFor();
  await shot("1-tenants");
  await page.locator("table.tenants").getByRole("link", { name: TENANT }).click();
  await page.locator("table.agents").getByRole("link", { name: AGENT }).click();
  await page.waitForURL(/\/agents\/helper$/);
  await shot("2-agent");

  // Start a conversation; the page shows the server's answer, then the reply arrives live.
  const send = page.getByRole("button", { name: "Send" });
  await page.fill('textarea[name="text"]', `[s:${SCENARIO}] hello there`);
  await Promise.all([page.waitForEvent("load"), send.click()]);
  assert.match(page.url(), /\/conversations\/console-/);
  assert.match(await page.locator(".result").innerText(), /^Sent\./);
  await live.locator(".badge.waiting_model").waitFor();
  await markDocument();
  await providerControl(`${SCENARIO}/release`, { method: "POST" });
  await live.locator(".entry.assistant strong", { hasText: "Hello" }).waitFor();
  assert.equal(await sameDocument(), true, "the reply appeared without a reload");
  // The banner said what the state was when the message was sent; the redraw that showed the reply took it away.
  assert.equal(await page.locator(".result").count(), 0);
  assert.match(await live.locator(".entry.assistant").last().innerText(), /and <script>this stays text<\/script>/);
  await live.locator(".badge.idle").waitFor();
  await shot("3-reply");

  // A message whose tool call is held, with a file chosen (the form goes as multipart/form-data): its card appears live.
  await page.fill('textarea[name="text"]', "please remember that my colour is teal");
  await page.setInputFiles('input[name="files"]', { name: "colour.txt", mimeType: "text/plain", buffer: Buffer.from("teal, as in the duck") });
  await Promise.all([page.waitForEvent("load"), send.click()]);
  assert.match(await page.locator(".result").innerText(), /^Sent\./);
  assert.match(await live.locator(".entry.user").last().innerText(), /colour\.txt/);
  await markDocument();
  await providerControl(`${SCENARIO}/release`, { method: "POST" });
  const card = live.locator("section.card").first();
  await card.locator("text=Approve").waitFor();
  await live.locator(".badge.waiting_approval").waitFor();
  assert.equal(await sameDocument(), true, "the card appeared without a reload");
  assert.match(await card.innerText(), /notes__remember/);
  await shot("4-held");

  // Approve: the page shows the agent's answer, then the card turns to performed by itself.
  await Promise.all([page.waitForEvent("load"), card.getByRole("button", { name: "Approve" }).click()]);
  assert.equal(await page.locator(".result").innerText(), "Approved. Performing it now.");
  await markDocument();
  await live.locator("section.card.performed").waitFor();
  await live.locator(".entry.assistant", { hasText: "Remembered: your colour is teal." }).waitFor();
  assert.equal(await sameDocument(), true);
  assert.match(await live.locator("section.card.performed .decided-by").innerText(), /^console:admin at /);
  // The banner is shown once: a reload does not bring it back.
  await page.reload();
  assert.equal(await page.locator(".result").count(), 0);
  await live.locator("section.card.performed").waitFor();
  await shot("5-performed");

  // Times are shown in the reader's zone, with the zone named.
  assert.match(await live.locator("time").first().innerText(), /\d\d:\d\d:\d\d (CET|CEST|GMT\+[12])$/);
  // Our own nonce'd script and style ran; nothing was refused or thrown.
  assert.deepEqual(problems, []);
}

// ---- people: Slack sign-in and roles ---------------------------------------------

const A = "TA";
const B = "TB";

async function api(method, path, body) {
  const res = await fetch(`${worker.url}/v1${path}`, {
    method,
    headers: { authorization: `Bearer ${TOKEN}`, ...(body ? { "content-type": "application/json" } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  });
  const text = await res.text();
  assert.ok(res.status < 300, `${method} ${path}: ${res.status} ${text}`);
  return JSON.parse(text);
}

/** Signs in through the login page's "Sign in with Slack", as the fake's next user. */
async function signInWithSlack(page, user, name) {
  const res = await fetch(`${slackOidc.url}/_control/user`, { method: "PUT", body: JSON.stringify({ team: A, user, name }) });
  assert.equal(res.status, 200);
  await page.goto(`${worker.url}/console/login`);
  await page.getByRole("link", { name: "Sign in with Slack" }).click();
  await page.waitForURL(/\/console$/);
}

/** Every way to reach B: its page, its agent, a conversation of it (404 each). */
async function bIsNotThere(page) {
  for (const path of [`/console/tenants/${B}`, `/console/tenants/${B}/agents/${AGENT}`, `/console/tenants/${B}/agents/${AGENT}/conversations/seed`]) {
    const res = await page.goto(`${worker.url}${path}`);
    assert.equal(res.status(), 404, path);
  }
}

test("people sign in with Slack: a tenant admin of A changes A's limit, a member sees only their conversations, neither reaches B", async () => {
  for (const tenant of [A, B]) await api("POST", `/tenants/${tenant}/agents/${AGENT}/messages`, { text: "hello", conversation: "seed" });
  await api("PUT", `/tenants/${A}/roles/slack:${A}:UADMIN`, { role: "admin" });
  await api("PUT", `/tenants/${A}/roles/slack:${A}:UMEMBER`, { role: "member" });
  await context.clearCookies();
  const page = await context.newPage();
  page.setDefaultTimeout(SEEN_MS);
  const shot = (name) => page.screenshot({ path: join(OUTPUT, `${name}.png`), fullPage: true });
  try {
    // The tenant admin: A's agents and usage, A's limit set; B nowhere.
    await signInWithSlack(page, "UADMIN", "Ada Admin");
    await page.locator("table.tenants").getByRole("link", { name: A }).click();
    await page.locator("table.agents").getByRole("link", { name: AGENT }).waitFor();
    assert.match(await page.locator("main").innerText(), /Spent today/);
    await page.fill('input[name="dailyUsd"]', "4");
    await Promise.all([page.waitForEvent("load"), page.getByRole("button", { name: "Set the limit" }).click()]);
    assert.match(await page.locator(".result").innerText(), /daily limit is now 4 USD/);
    // Named as they signed in, the identity on hover.
    await page.locator(`.audit .actor [title="slack:${A}:UADMIN"]`, { hasText: "Ada Admin" }).first().waitFor();
    await shot("6-tenant-admin");
    assert.equal((await api("GET", `/tenants/${A}/limits`)).own.dailyUsd, 4);
    assert.equal(await page.locator("table.tenants").getByRole("link", { name: B }).count(), 0);
    await bIsNotThere(page);

    // The member: no usage, only the conversations they started; B nowhere.
    await page.goto(`${worker.url}/console`);
    await Promise.all([page.waitForURL(/\/console\/login$/), page.getByRole("button", { name: "Sign out" }).click()]);
    await signInWithSlack(page, "UMEMBER", "Max Member");
    await page.locator("table.tenants").getByRole("link", { name: A }).click();
    assert.doesNotMatch(await page.locator("main").innerText(), /Spent today/);
    await page.locator("table.agents").getByRole("link", { name: AGENT }).click();
    assert.equal(await page.locator('a[href$="/conversations/seed"]').count(), 0, "the platform's conversation is not the member's");
    await page.fill('textarea[name="text"]', "a question of my own");
    await Promise.all([page.waitForEvent("load"), page.getByRole("button", { name: "Send" }).click()]);
    const mine = decodeURIComponent(/\/conversations\/([^/?]+)$/.exec(page.url())[1]);
    await page.goto(`${worker.url}/console/tenants/${A}/agents/${AGENT}`);
    await page.locator(`a[href$="/conversations/${mine}"]`).first().waitFor();
    assert.equal((await page.goto(`${worker.url}/console/tenants/${A}/agents/${AGENT}/conversations/seed`)).status(), 404);
    await shot("7-member");
    await bIsNotThere(page);
  } catch (err) {
    await shot("failure-people").catch(() => undefined);
    throw err;
  }
});

test("people sign in with Discord: a member of guild G sees G's conversations they may see, not tenant B", async () => {
  const G = "1457468924290662599";
  const user = "1400000000000000077";
  for (const tenant of [G, B]) await api("POST", `/tenants/${tenant}/agents/${AGENT}/messages`, { text: "hello", conversation: "seed" });
  await api("PUT", `/tenants/${G}/roles/discord:${G}:${user}`, { role: "member" });
  const res = await fetch(`${discordOAuth.url}/_control/user`, { method: "PUT", body: JSON.stringify({ id: user, username: "dora", global_name: "Dora Discord", guilds: [{ id: G, name: "Guild G" }] }) });
  assert.equal(res.status, 200);
  await context.clearCookies();
  const page = await context.newPage();
  page.setDefaultTimeout(SEEN_MS);
  const shot = (name) => page.screenshot({ path: join(OUTPUT, `${name}.png`), fullPage: true });
  try {
    await page.goto(`${worker.url}/console/login`);
    await page.getByRole("link", { name: "Sign in with Discord" }).click();
    await page.waitForURL(/\/console$/);
    await page.locator("table.tenants").getByRole("link", { name: G }).click();
    await page.locator("table.agents").getByRole("link", { name: AGENT }).click();
    // A member sees the conversations they started: none yet, then the one they start.
    assert.equal(await page.locator('a[href$="/conversations/seed"]').count(), 0, "the platform's conversation is not the member's");
    await page.fill('textarea[name="text"]', "a question from Discord");
    await Promise.all([page.waitForEvent("load"), page.getByRole("button", { name: "Send" }).click()]);
    const mine = decodeURIComponent(/\/conversations\/([^/?]+)$/.exec(page.url())[1]);
    await page.goto(`${worker.url}/console/tenants/${G}/agents/${AGENT}`);
    await page.locator(`a[href$="/conversations/${mine}"]`).first().waitFor();
    await shot("8-discord-member");
    await bIsNotThere(page);
  } catch (err) {
    await shot("failure-discord").catch(() => undefined);
    throw err;
  }
});

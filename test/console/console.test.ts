// The web console: sessions that expire and end at sign-out, forms that only
// this console's own pages can post, nothing from the URL shown as a message,
// every value escaped (the agent's Markdown too), navigation from the
// directory, live regions, and actions that reach the agent as console:admin;
// and people signed in with Slack (the loopback fake of its OpenID Connect
// endpoints), whose roles decide every tenant page and action.
import { env, exports } from "cloudflare:workers";
import { runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { usd } from "../../console/layout.tsx";
import { sessionStub } from "../../console/session-object.ts";
import { hmacHex, sha256Hex } from "../../lib/http.ts";
import { agent, agentExists } from "../agents.ts";
import { signInAs } from "./sign-in.ts";
import { chooseModels, getConversation, holdLedger, ledgerAppends, PNG, postMessage, providerRequests, releaseLedger, releaseProvider, script, settled, sharedWithModel, unique, waitFor, worker } from "../support.ts";

const TOKEN = "test-admin-token";
const BEARER = { authorization: `Bearer ${TOKEN}` };
const ORIGIN = "http://antiproton.test";
const A = "clerk";

type Headers = Record<string, string>;

/** Signs in as a browser on `origin` would post it (the Origin header is the page's). */
function login(token: string, origin = ORIGIN): Promise<Response> {
  return exports.default.fetch(
    new Request(`${origin}/console/login`, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded", origin },
      body: new URLSearchParams({ token }).toString(),
      redirect: "manual",
    }),
  );
}

async function signIn(): Promise<Headers> {
  const res = await login(TOKEN);
  expect(res.status).toBe(303);
  return { cookie: res.headers.get("set-cookie")!.split(";")[0]! };
}

async function html(path: string, headers: Headers): Promise<string> {
  const res = await worker(path, { headers });
  expect(res.status, path).toBe(200);
  return res.text();
}

const seg = encodeURIComponent;
const agentPage = (tenant: string, name = A) => `/console/tenants/${seg(tenant)}/agents/${seg(name)}`;
const conversationPage = (tenant: string, id: string) => `${agentPage(tenant)}/conversations/${seg(id)}`;
const holdAction = (tenant: string, holdId: string) => `${agentPage(tenant)}/holds/${seg(holdId)}`;

/** The hidden fields of the POST form for `action` on `page`, as the browser would send them. */
function formFields(page: string, action: string): Record<string, string> {
  const start = page.indexOf(`<form method="post" action="${action}"`);
  expect(start, `a form posting to ${action}`).toBeGreaterThanOrEqual(0);
  const form = page.slice(start, page.indexOf("</form>", start));
  return Object.fromEntries([...form.matchAll(/<input type="hidden" name="([^"]+)" value="([^"]*)"/g)].map((m) => [m[1]!, m[2]!]));
}

function post(path: string, fields: Record<string, string>, headers: Headers, origin: string | null = ORIGIN): Promise<Response> {
  return worker(path, {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded", ...(origin ? { origin } : {}), ...headers },
    body: new URLSearchParams(fields).toString(),
    redirect: "manual",
  });
}

/** Posts a form with files chosen, as a browser sends it: multipart/form-data. */
function postFiles(path: string, fields: Record<string, string>, files: File[], headers: Headers, origin: string | null = ORIGIN): Promise<Response> {
  const body = new FormData();
  for (const [name, value] of Object.entries(fields)) body.append(name, value);
  for (const file of files) body.append("files", file);
  return worker(path, { method: "POST", headers: { ...(origin ? { origin } : {}), ...headers }, body, redirect: "manual" });
}

/** Posts the form for `action` found on `pagePath`, with extra fields; returns the page the redirect leads to. */
async function submit(pagePath: string, action: string, extra: Record<string, string>, headers: Headers): Promise<{ res: Response; shown: string }> {
  const res = await post(action, { ...formFields(await html(pagePath, headers), action), ...extra }, headers);
  expect(res.status).toBe(303);
  const result = res.headers.get("set-cookie")?.split(";")[0];
  const shown = await html(res.headers.get("location")!, { ...headers, ...(result ? { cookie: `${headers.cookie}; ${result}` } : {}) });
  return { res, shown };
}

/** A browser's cookies after `res`: its Set-Cookie headers added to `cookie`, those that expire them removed. */
function keep(cookie: string, res: Response): string {
  const jar = new Map(cookie.split("; ").map((pair) => [pair.slice(0, pair.indexOf("=")), pair] as const));
  for (const set of res.headers.getSetCookie()) {
    const pair = set.split(";")[0]!;
    const name = pair.slice(0, pair.indexOf("="));
    if (/max-age=0(;|$)/i.test(set) || /expires=[^;]*1970/i.test(set)) jar.delete(name);
    else jar.set(name, pair);
  }
  return [...jar.values()].join("; ");
}

/** The result box of a page, if any. */
function resultOf(page: string): string | undefined {
  return /<p class="result" role="status">([^<]*)<\/p>/.exec(page)?.[1];
}

/** A turn whose model asks for the gated vault__append of an entry with markup in it. */
async function heldTurn(tenant: string) {
  const s = unique("console");
  const entry = `<script>alert(1)</script>${unique("e")}`;
  await script(s, [{ toolCalls: [{ name: "vault__append", arguments: { entry } }] }, { text: "Waiting for approval." }, { text: "Done." }]);
  await postMessage(tenant, A, { text: `[s:${s}] please record ${entry}`, conversation: s });
  await settled(tenant, A, s);
  const holdId = (await getConversation(tenant, A, s)).holds[0]!.holdId;
  return { s, entry, holdId, page: conversationPage(tenant, s) };
}

/** The object of the session a cookie header names (by the hash of its id), and the name it goes by. */
async function sessionObject(headers: Headers) {
  const id = decodeURIComponent(headers.cookie!.replace(/^antiproton_console=/, "")).split(".")[0]!;
  const key = await sha256Hex(id);
  return { key, stub: sessionStub(env, key) };
}

/** Everything the session's object keeps. */
async function kept(headers: Headers): Promise<Record<string, unknown>> {
  return runInDurableObject((await sessionObject(headers)).stub, async (_instance, state) => Object.fromEntries(await state.storage.list()));
}

describe("console sessions", () => {
  it("without a session: a page is sent to sign in, a POST or a live poll is refused (401)", async () => {
    for (const path of ["/console", "/console/tenants/console_ok", agentPage("console_ok"), conversationPage("console_ok", "x")]) {
      const res = await worker(path, { redirect: "manual" });
      expect(res.status).toBe(303);
      expect(res.headers.get("location")).toBe("/console/login");
    }
    expect((await worker(conversationPage("console_ok", "x"), { headers: { "x-console-live": "0" } })).status).toBe(401);
    expect((await post(holdAction("console_ok", "h1"), { conversation: "x", approve: "1" }, {})).status).toBe(401);
    expect((await post(holdAction("console_ok", "h1"), { conversation: "x", approve: "1" }, { cookie: "antiproton_console=forged" })).status).toBe(401);
    expect(await html("/console/login", {})).toContain('name="token"');
  });

  it("a wrong token gets the form again with 401 and no cookie", async () => {
    const res = await login("not-the-token");
    expect(res.status).toBe(401);
    expect(res.headers.get("set-cookie")).toBeNull();
    expect(await res.text()).toContain("That is not the admin token.");
  });

  it("signing in sets an HttpOnly, Secure, SameSite=Strict cookie on /console that expires with the session and holds neither the token nor the session object's name", async () => {
    const res = await login(TOKEN);
    expect(res.status).toBe(303);
    expect(res.headers.get("location")).toBe("/console");
    const cookie = res.headers.get("set-cookie")!;
    expect(cookie).not.toContain(TOKEN);
    expect(cookie).toMatch(/^antiproton_console=[A-Za-z0-9_-]{43}\.[A-Za-z0-9%]+;/);
    expect(cookie).toMatch(/Max-Age=43200/); // CONSOLE_SESSION_HOURS default 12
    expect(cookie).toMatch(/HttpOnly/);
    expect(cookie).toMatch(/Secure/);
    expect(cookie).toMatch(/SameSite=Strict/);
    expect(cookie).toMatch(/Path=\/console(;|$)/);
    const headers = { cookie: cookie.split(";")[0]! };
    const { key } = await sessionObject(headers);
    expect(((await kept(headers)).session as { expiresAt: number }).expiresAt).toBeGreaterThan(Date.now() + 11 * 3_600_000);
    expect(cookie).not.toContain(key);
    // Plain http on loopback (wrangler dev) cannot keep a Secure cookie.
    const local = await login(TOKEN, "http://127.0.0.1:8787");
    expect(local.status).toBe(303);
    expect(local.headers.get("set-cookie")).not.toMatch(/Secure/);
  });

  it("a session past its expiry is refused: pages go to sign-in, live polls get 401, and its object empties itself", async () => {
    const headers = await signIn();
    expect(await html("/console", headers)).toContain("Tenants");
    // Age the session past its expiry, as time would (its alarm not yet run).
    await runInDurableObject((await sessionObject(headers)).stub, async (_instance, state) => {
      await state.storage.put("session", { ...((await state.storage.get("session")) as object), expiresAt: Date.now() - 1 });
    });
    const res = await worker("/console", { headers, redirect: "manual" });
    expect(res.status).toBe(303);
    expect(res.headers.get("location")).toBe("/console/login");
    expect((await worker("/console", { headers: { ...headers, "x-console-live": "0" } })).status).toBe(401);
    expect(await kept(headers)).toEqual({});
  });

  it("a session's alarm at its expiry empties its object; two sessions are two objects, one ending leaves the other", async () => {
    const [first, second] = [await signIn(), await signIn()];
    const [a, b] = [await sessionObject(first), await sessionObject(second)];
    expect(a.key).not.toBe(b.key);
    expect(a.stub.id.toString()).not.toBe(b.stub.id.toString());
    expect(Object.keys(await kept(first))).toEqual(["session"]);
    expect(await runDurableObjectAlarm(a.stub)).toBe(true);
    expect(await kept(first)).toEqual({});
    expect((await worker("/console", { headers: first, redirect: "manual" })).status).toBe(303);
    expect(await html("/console", second)).toContain("Tenants");
    expect(Object.keys(await kept(second))).toEqual(["session"]);
  });

  it("sign-out ends the session on the server: the same cookie is refused afterwards", async () => {
    const headers = await signIn();
    const home = await html("/console", headers);
    const signOut = formFields(home, "/console/logout");
    // Without the form's token, sign-out is refused and the session lives on.
    expect((await post("/console/logout", {}, headers)).status).toBe(403);
    expect((await worker("/console", { headers, redirect: "manual" })).status).toBe(200);
    const res = await post("/console/logout", signOut, headers);
    expect(res.status).toBe(303);
    expect(res.headers.get("location")).toBe("/console/login");
    expect(res.headers.get("set-cookie")).toMatch(/antiproton_console=; Max-Age=0/);
    const after = await worker("/console", { headers, redirect: "manual" });
    expect(after.status).toBe(303);
    expect(after.headers.get("location")).toBe("/console/login");
    // Nothing of it stays: its object is empty, its alarm gone.
    expect(await kept(headers)).toEqual({});
    expect(await runInDurableObject((await sessionObject(headers)).stub, (_instance, state) => state.storage.getAlarm())).toBeNull();
  });

  it("a bearer header works as well as a session, and needs no form token", async () => {
    expect(await html("/console", BEARER)).toContain("Open an agent by name");
    const res = await worker("/console?tenant=console_ok&agent=clerk", { headers: BEARER, redirect: "manual" });
    expect(res.status).toBe(303);
    expect(res.headers.get("location")).toBe(agentPage("console_ok"));
    expect((await worker("/console", { headers: { authorization: "Bearer wrong" }, redirect: "manual" })).status).toBe(303);
    // A script posts with the bearer alone: no Origin, no form token.
    const { s, holdId } = await heldTurn("console_ok");
    const decided = await post(holdAction("console_ok", holdId), { conversation: s, approve: "0" }, BEARER, null);
    expect(decided.status).toBe(303);
    expect(decided.headers.get("location")).toBe(conversationPage("console_ok", s));
    expect((await getConversation("console_ok", A, s)).holds[0]!.state).toBe("denied");
    // A wrong bearer is no bearer: the Origin check applies, and a script sends none.
    expect((await post(holdAction("console_ok", holdId), { conversation: s, approve: "0" }, { authorization: "Bearer wrong" }, null)).status).toBe(403);
  });

  it("pages carry a CSP that runs only the page's own nonce'd script, and are not cached", async () => {
    const res = await worker("/console", { headers: await signIn() });
    const csp = res.headers.get("content-security-policy")!;
    const nonce = /script-src 'nonce-([^']+)'/.exec(csp)?.[1];
    expect(nonce).toBeDefined();
    expect(csp).toContain("default-src 'none'");
    expect(csp).toContain("form-action 'self'");
    expect(csp).not.toContain("unsafe-inline");
    expect(res.headers.get("cache-control")).toBe("no-store");
    const body = await res.text();
    const scripts = [...body.matchAll(/<script([^>]*)>/g)].map((m) => m[1]);
    expect(scripts).toEqual([` nonce="${nonce}"`]);
  });

  it("bad names are 400 and an unknown conversation is 404, as pages", async () => {
    const bad = await worker("/console/tenants/bad%20name/agents/clerk", { headers: BEARER });
    expect(bad.status).toBe(400);
    expect(bad.headers.get("content-type")).toMatch(/text\/html/);
    expect((await worker(conversationPage("console_ok", "nope"), { headers: BEARER })).status).toBe(404);
  });
});

describe("console forms are this console's own", () => {
  it("a cross-site POST, or one without its form's token, or with another form's token, is 403 and changes nothing", async () => {
    const headers = await signIn();
    const { s, entry, holdId, page } = await heldTurn("console_ok");
    const shown = await html(page, headers);
    const approve = { ...formFields(shown, holdAction("console_ok", holdId)), approve: "1" };
    const send = `${page}/messages`;
    const message = { ...formFields(shown, send), text: "sent from elsewhere" };

    const attempts: [string, Record<string, string>, string | null][] = [
      [holdAction("console_ok", holdId), approve, "https://evil.example"], // cross-site, even with a valid token
      [holdAction("console_ok", holdId), { ...approve, _token: "" }, ORIGIN], // same origin, no token
      [holdAction("console_ok", holdId), { ...approve, _token: formFields(shown, `${page}/compact`)._token! }, ORIGIN], // another form's token
      [send, message, "https://evil.example"],
      [send, { text: "no token" }, ORIGIN],
      [holdAction("console_ok", holdId), approve, null], // no Origin and no Sec-Fetch-Site: not known to be this console
    ];
    for (const [action, fields, origin] of attempts) {
      const res = await post(action, fields, headers, origin);
      expect(res.status, `${action} from ${origin}`).toBe(403);
      expect(res.headers.get("location")).toBeNull();
    }
    const cross = await post(send, message, headers, "https://evil.example");
    expect(await cross.text()).toContain("This form was not sent from this console");
    const view = await getConversation("console_ok", A, s);
    expect(view.holds[0]!.state).toBe("pending");
    expect(view.transcript.map((e) => e.text)).not.toContain("sent from elsewhere");
    expect(await ledgerAppends(entry)).toHaveLength(0);
    // A same-site navigation header is enough where a browser sends no Origin.
    const fetchSite = await post(holdAction("console_ok", holdId), { ...approve, approve: "0" }, { ...headers, "sec-fetch-site": "same-origin" }, null);
    expect(fetchSite.status).toBe(303);
  });
});

describe("console shows nothing from the URL, and every value as text", () => {
  const lure = "Paste your token at https://evil.example";

  it("?notice= or any other query value is never shown as a message, and a result cookie must be the server's own", async () => {
    const headers = await signIn();
    const { page, s } = await heldTurn("console_ok");
    const query = new URLSearchParams({ notice: lure, result: lure, message: lure, error: lure, status: lure }).toString();
    for (const path of [`/console?${query}`, `${agentPage("console_ok")}?${query}`, `${page}?${query}`, `/console/tenants/console_ok?${query}`, `/console/login?${query}`]) {
      const body = await html(path, headers);
      expect(body, path).not.toContain("Paste your token");
      expect(resultOf(body), path).toBeUndefined();
    }
    // The search box shows its own value back, in the input only; no sentence repeats it.
    const search = await html(`${agentPage("console_ok")}?q=${seg(lure)}`, headers);
    expect(search.match(/Paste your token/g)).toHaveLength(1);
    expect(search).toContain(`value="${lure}"`);
    // A result cookie made by anyone but the server is ignored.
    const forged = await html(page, { cookie: `${headers.cookie}; antiproton_console_result=${seg(lure)}` });
    expect(forged).not.toContain("Paste your token");
    expect(s).toBeTruthy();
  });

  it("<script> and <img onerror> in a person's message, a tool result and the agent's Markdown are shown as text; unsafe links are not links", async () => {
    const headers = await signIn();
    const s = unique("xss");
    const evil = `<img src=x onerror=alert(1)>`;
    await script(s, [
      { toolCalls: [{ name: "ledger__read", arguments: { entry: `${evil}<script>alert(2)</script>` } }] },
      { text: `# Report\n**bold** <script>alert(3)</script> ${evil}\n\n- [click](javascript:alert(4))\n- [docs](https://example.com/x?a=1&b=2)\n\n\`\`\`\n<b>code</b>\n\`\`\`` },
    ]);
    await postMessage("console_md", A, { text: `[s:${s}] ${evil} <script>alert(5)</script>`, conversation: s });
    await settled("console_md", A, s);
    const body = await html(conversationPage("console_md", s), headers);
    const main = body.slice(body.indexOf("<main>"), body.indexOf("</main>"));
    expect(main).not.toMatch(/<script|<img|<b>/i);
    expect(main).toContain("&lt;img src=x onerror=alert(1)&gt; &lt;script&gt;alert(5)&lt;/script&gt;"); // the person's message
    expect(main).toContain('0 entries for &quot;&lt;img src=x onerror=alert(1)&gt;&lt;script&gt;alert(2)&lt;/script&gt;&quot;'); // the tool result
    expect(main).toContain("<strong>bold</strong> &lt;script&gt;alert(3)&lt;/script&gt; &lt;img src=x onerror=alert(1)&gt;"); // the agent's Markdown
    expect(main).toContain("<h4>Report</h4>");
    expect(main).toContain("<code>&lt;b&gt;code&lt;/b&gt;</code>");
    expect(main).toContain('<a href="https://example.com/x?a=1&amp;b=2" rel="noopener noreferrer nofollow">docs</a>');
    expect(main).not.toMatch(/href="javascript:/i);
    expect(main).toContain("click (javascript:alert(4))");
  });
});

describe("console navigation", () => {
  it("lists tenants and their agents from the directory, with the platform of their first event", async () => {
    const headers = await signIn();
    const tenant = unique("dir");
    await postMessage(tenant, "helper", { text: "hello", conversation: "first" });
    const home = await waitFor("the tenant in the list", async () => {
      const body = await html("/console", headers);
      return body.includes(`href="/console/tenants/${tenant}"`) ? body : undefined;
    });
    const row = home.slice(home.indexOf(`href="/console/tenants/${tenant}"`));
    expect(row.slice(0, row.indexOf("</tr>"))).toContain("<td>api</td>");
    const tenantPage = await html(`/console/tenants/${tenant}`, headers);
    expect(tenantPage).toContain(`href="${agentPage(tenant, "helper")}"`);
  });

  it("a tenant's page charts its usage from the ledger: today and the last 30 days, tokens with the cached share, cost and object busy time", async () => {
    const headers = await signIn();
    const tenant = unique("usage");
    expect(await html(`/console/tenants/${tenant}`, headers)).toContain("No usage in the last 30 days.");
    expect((await worker(`/v1/tenants/${tenant}/limits`, { method: "PUT", headers: { ...BEARER, "content-type": "application/json" }, body: JSON.stringify({ dailyUsd: 3 }) })).status).toBe(200);
    const s = unique("usage");
    await script(s, [{ toolCalls: [{ name: "clock__now", arguments: {} }], usage: { input: 100, cached: 300, output: 20 } }, { text: "ok", usage: { input: 60, cached: 540, output: 10 } }]);
    await postMessage(tenant, A, { text: `[s:${s}] hi`, conversation: s });
    await settled(tenant, A, s);
    const page = await html(`/console/tenants/${tenant}`, headers);
    const cost = (160 * 0.5 + 840 * 0.05 + 30 * 1.5) / 1e6;
    const rowOf = (label: string) => {
      const at = page.indexOf(`<td>${label}</td>`);
      expect(at, label).toBeGreaterThan(0);
      return [...page.slice(at, page.indexOf("</tr>", at)).matchAll(/<td class="num">([^<]*)<\/td>/g)].map((m) => m[1]);
    };
    // Two calls, 1000 tokens in of which 840 cached (84%), 30 out; busy time as the agent handed it to the ledger.
    for (const label of ["Today", "Last 30 days"]) expect(rowOf(label).slice(0, 5)).toEqual(["2", "1000", "84%", "30", usd(cost)]);
    expect(rowOf("Today")[5]).toMatch(/^\d+ ms$/);
    expect(page).toContain(`Spent today with the operator&#39;s keys: ${usd(cost)} (daily limit $3.00)`);
    // Three charts of 30 days and one of today's 24 hours; today's bar says what it stands for.
    expect(page.match(/<figure class="chart">/g)).toHaveLength(4);
    expect(page.match(/<g class="bar">/g)).toHaveLength(3 * 30 + 24);
    const today = new Date().toISOString().slice(0, 10);
    expect(page).toContain(`<title>${today}: cached input 840, other input 160, output 30</title>`);
    expect(page).toContain(`<title>${today}: cost ${usd(cost)}</title>`);
    // The conversation's own page shows the object's busy time on it.
    expect(await html(conversationPage(tenant, s), headers)).toMatch(/Object busy: \d+ ms/);
  });

  it("conversations come newest first, a page at a time, and can be searched by the words in them", async () => {
    const tenant = unique("pages");
    const route = { tenant, agent: A };
    for (const [id, text] of [["c1", "apples"], ["c2", "pears and a Rare_Word"], ["c3", "plums"]] as const) {
      await postMessage(tenant, A, { text, conversation: id });
      await settled(tenant, A, id);
    }
    const first = await agent(tenant, A).conversationList(route, { limit: 2 });
    expect(first.conversations.map((c) => c.id)).toEqual(["c3", "c2"]);
    expect(first.conversations[0]!.preview).toBe("plums");
    const second = await agent(tenant, A).conversationList(route, { limit: 2, after: first.next });
    expect(second.conversations.map((c) => c.id)).toEqual(["c1"]);
    expect(second.next).toBeUndefined();
    // Words from any message, case-insensitive; LIKE's wildcards are taken literally.
    expect((await agent(tenant, A).conversationList(route, { limit: 10, search: "rare_word" })).conversations.map((c) => c.id)).toEqual(["c2"]);
    expect((await agent(tenant, A).conversationList(route, { limit: 10, search: "%" })).conversations).toEqual([]);
    expect((await agent(tenant, A).conversationList(route, { limit: 10, search: "ok: plums" })).conversations.map((c) => c.id)).toEqual(["c3"]);

    const headers = await signIn();
    const listed = await html(`${agentPage(tenant)}?q=pears`, headers);
    expect(listed).toContain(`href="${conversationPage(tenant, "c2")}"`);
    expect(listed).not.toContain(`href="${conversationPage(tenant, "c1")}"`);
  });

  it("a conversation waiting on a hold says so (the API still says idle), and the home page lists pending approvals across tenants, oldest first", async () => {
    const headers = await signIn();
    const older = await heldTurn("console_ok");
    const newer = await heldTurn("console_no");
    expect((await getConversation("console_ok", A, older.s)).status).toBe("idle");
    expect(await html(older.page, headers)).toContain('<span class="badge waiting_approval">Waiting for approval</span>');
    const list = await html(agentPage("console_ok"), headers);
    const row = list.slice(list.indexOf(`href="${older.page}"`));
    expect(row.slice(0, row.indexOf("</tr>"))).toContain("Waiting for approval");

    const home = await html("/console", headers);
    const at = (page: string, holdId: string) => home.indexOf(`href="${page}#hold-${holdId}"`);
    expect(at(older.page, older.holdId)).toBeGreaterThan(0);
    expect(at(newer.page, newer.holdId)).toBeGreaterThan(at(older.page, older.holdId));
  });
});

describe("console live regions", () => {
  it("a poll with the current mark is 204; a change (a new message) brings the region's new HTML and mark", async () => {
    const headers = await signIn();
    const s = unique("live");
    await postMessage("console_live", A, { text: "first", conversation: s });
    await settled("console_live", A, s);
    const page = conversationPage("console_live", s);
    const mark = /data-live="" data-mark="([^"]+)"/.exec(await html(page, headers))![1]!;
    expect((await worker(page, { headers: { ...headers, "x-console-live": mark } })).status).toBe(204);
    await postMessage("console_live", A, { text: "second words", conversation: s });
    await settled("console_live", A, s);
    const res = await worker(page, { headers: { ...headers, "x-console-live": mark } });
    expect(res.status).toBe(200);
    expect(res.headers.get("x-console-mark")).not.toBe(mark);
    const region = await res.text();
    expect(region).toContain("second words");
    expect(region).not.toContain("<html");
    // The agent page's region follows the agent as a whole.
    const agentMark = /data-mark="([^"]+)"/.exec(await html(agentPage("console_live"), headers))![1]!;
    expect((await worker(agentPage("console_live"), { headers: { ...headers, "x-console-live": agentMark } })).status).toBe(204);
  });

  it("a card decided elsewhere (a click in Slack) and then performed changes the mark each time, while the turn still waits for the model", async () => {
    const headers = await signIn();
    const s = unique("elsewhere");
    const entry = unique("e");
    // The model's next answer is held, so the turn stays open (no log row) while the card moves on.
    await script(s, [{ toolCalls: [{ name: "vault__append", arguments: { entry } }] }, { hold: true, text: "Waiting." }, { text: "Done." }]);
    await postMessage("approvals", A, { text: `[s:${s}] record ${entry}`, conversation: s });
    const { holdId } = await waitFor("the hold, with the turn waiting for the model", async () => {
      const view = await getConversation("approvals", A, s);
      return view.status === "waiting_model" && view.holds[0];
    });
    const page = conversationPage("approvals", s);
    // The approved call waits at the ledger, so the card stays "being performed" for a while.
    await holdLedger("append", entry);
    try {
      const poll = (mark: string) => worker(page, { headers: { ...headers, "x-console-live": mark } });
      const mark = /data-live="" data-mark="([^"]+)"/.exec(await html(page, headers))![1]!;
      expect((await poll(mark)).status).toBe(204);
      const click = await agent("approvals", A).submit(
        { tenant: "approvals", agent: A },
        { id: unique("slack-click"), kind: "decision", conversation: s, holdId, approve: true, boundTo: { tenant: "approvals", agent: A }, user: { platform: "slack", id: "U_APPROVER", name: "Ann" } },
      );
      expect(click.decided).toBe(true);
      const approved = await poll(mark);
      expect(approved.status).toBe(200);
      const region = await approved.text();
      expect(region).toContain('<span class="badge approved">Approved, being performed</span>');
      expect(region).toMatch(/<dd class="decided-by">Ann at <time/);

      await releaseLedger("append", entry);
      await waitFor("the hold to be performed", async () => (await getConversation("approvals", A, s)).holds[0]!.state === "performed");
      expect((await getConversation("approvals", A, s)).status).toBe("waiting_model");
      const performed = await poll(approved.headers.get("x-console-mark")!);
      expect(performed.status).toBe(200);
      expect(await performed.text()).toContain('<span class="badge performed">Performed</span>');
    } finally {
      // A failure above must not leave the ledger or the model waiting for the tests after it.
      await releaseLedger("append", entry);
      await releaseProvider(s);
    }
    await settled("approvals", A, s);
  });

  it("the mark moves when a model job opens, which writes no log row (running → waiting for the model)", async () => {
    const tenant = unique("mark");
    await postMessage(tenant, A, { text: "hello", conversation: "c" });
    await settled(tenant, A, "c");
    const route = { tenant, agent: A };
    const before = await agent(tenant, A).changes(route, "c");
    const elsewhere = await agent(tenant, A).changes(route, "other");
    await runInDurableObject(agent(tenant, A), (_instance, state) =>
      void state.storage.sql.exec("INSERT INTO model_jobs (id, conversation, turn, purpose, status, created_at) VALUES ('j', 'c', 1, 'chat', 'pending', 0)"),
    );
    expect(await agent(tenant, A).changes(route, "c")).not.toBe(before);
    // Scoped: another conversation's mark stays.
    expect(await agent(tenant, A).changes(route, "other")).toBe(elsewhere);
  });
});

describe("console actions", () => {
  it("Approve (where APPROVERS lists console:admin) shows the agent's answer, records console:admin, and performs the call once", async () => {
    const headers = await signIn();
    const { s, entry, holdId, page } = await heldTurn("console_ok");
    const before = await html(page, headers);
    expect(before).not.toContain("<script>alert");
    expect(before).toContain("&lt;script&gt;alert(1)&lt;/script&gt;");
    expect(before).toMatch(/<pre class="arguments">\{\n {2}&quot;entry&quot;: &quot;&lt;script&gt;/);

    const { res, shown } = await submit(page, holdAction("console_ok", holdId), { approve: "1" }, headers);
    expect(res.headers.get("location")).toBe(page);
    expect(resultOf(shown)).toBe("Approved. Performing it now.");
    // Shown once, as a browser keeps its cookies: the page that shows the result deletes it, so a reload shows none.
    const withResult = keep(headers.cookie!, res);
    const first = await worker(page, { headers: { cookie: withResult } });
    expect(resultOf(await first.text())).toBe("Approved. Performing it now.");
    expect(resultOf(await html(page, { cookie: keep(withResult, first) }))).toBeUndefined();

    await waitFor("the hold to be performed", async () => (await getConversation("console_ok", A, s)).holds[0]!.state === "performed");
    const after = await html(page, headers);
    expect(after).toContain('class="card performed"');
    expect(after).toMatch(/<dd class="decided-by">console:admin at <time/);
    expect(after).not.toContain('name="approve"');
    expect(await ledgerAppends(entry)).toHaveLength(1);
    // The decision is in the tenant's audit trail (the agent appends it, after the change), with its actor, and on the tenant's page.
    const row = await waitFor("the decision's row", async () => {
      const audit = (await (await worker("/v1/tenants/console_ok/audit", { headers: BEARER })).json()) as { entries: { actor: string; action: string; after: { hold: string } }[] };
      return audit.entries.find((e) => e.after?.hold === holdId);
    });
    expect(row).toMatchObject({ actor: "console:admin", action: "hold.approve" });
    expect(await html("/console/tenants/console_ok", headers)).toMatch(/<b class="actor">console:admin<\/b> <span class="action">hold.approve<\/span>/);
  });

  it("an Authorization header that is not the bearer token neither skips the Origin check nor lets the cookie through", async () => {
    const headers = await signIn();
    const { s, holdId } = await heldTurn("console_ok");
    for (const authorization of [`Basic ${btoa(`admin:${TOKEN}`)}`, "Bearer wrong"]) {
      const res = await post(holdAction("console_ok", holdId), { conversation: s, approve: "1" }, { ...headers, authorization }, "https://evil.example");
      expect([authorization, res.status]).toEqual([authorization, 403]);
      expect((await worker("/console", { headers: { ...headers, authorization }, redirect: "manual" })).status).toBe(303);
    }
    expect((await getConversation("console_ok", A, s)).holds[0]!.state).toBe("pending");
  });

  it("where APPROVERS does not list console:admin, Approve and Deny are not offered, and a posted decision is refused with the agent's words; the hold stays pending", async () => {
    const headers = await signIn();
    const { s, entry, holdId, page } = await heldTurn("console_no");
    const shownBefore = await html(page, headers);
    expect(shownBefore).toContain('class="card pending"');
    expect(shownBefore).not.toContain('name="approve"');
    const refused = await post(holdAction("console_no", holdId), { conversation: s, approve: "1" }, BEARER, null);
    expect(refused.status).toBe(303);
    const result = refused.headers.get("set-cookie")!.split(";")[0]!;
    expect(resultOf(await html(page, { cookie: `${headers.cookie}; ${result}` }))).toBe("You are not allowed to decide this approval. It is still waiting.");
    expect((await getConversation("console_no", A, s)).holds[0]!.state).toBe("pending");
    expect(await ledgerAppends(entry)).toHaveLength(0);
  });

  it("start a conversation, send into it, stop a running turn and compact, each answered by the agent", async () => {
    const headers = await signIn();
    const tenant = unique("act");
    // The agent exists once it has taken an event.
    await postMessage(tenant, A, { text: "hello", conversation: "seed" });
    const s = unique("s");
    await script(s, [{ text: "first answer" }, { hold: true, text: "late" }, { text: "summary of it all" }]);

    const start = `${agentPage(tenant)}/conversations`;
    const started = await submit(agentPage(tenant), start, { text: `[s:${s}] begin` }, headers);
    const id = /\/conversations\/([^/?]+)$/.exec(started.res.headers.get("location")!)![1]!;
    expect(decodeURIComponent(id)).toMatch(/^console-/);
    expect(resultOf(started.shown)).toMatch(/^Sent\. The conversation is now: (running|waiting for the model)\.$/);
    const view = await settled(tenant, A, decodeURIComponent(id));
    expect(view.transcript[0]).toMatchObject({ role: "user", text: `[s:${s}] begin`, by: "console:admin" });
    expect(view.transcript.at(-1)!.text).toBe("first answer");

    const page = conversationPage(tenant, decodeURIComponent(id));
    const sent = await submit(page, `${page}/messages`, { text: "second, held by the model" }, headers);
    expect(resultOf(sent.shown)).toMatch(/^Sent\./);
    await waitFor("the model to be asked", async () => (await providerRequests(s)).length === 2);
    expect(await html(page, headers)).toContain(`action="${page}/stop"`);
    const stopped = await submit(page, `${page}/stop`, {}, headers);
    expect(resultOf(stopped.shown)).toBe("Stopped the running turn.");
    expect((await getConversation(tenant, A, decodeURIComponent(id))).status).toBe("idle");
    await releaseProvider(s);

    const compacted = await submit(page, `${page}/compact`, {}, headers);
    expect(resultOf(compacted.shown)).toBe("Compacting: the earlier messages are summarised into a handover; the latest stay as they are.");
    const done = await settled(tenant, A, decodeURIComponent(id));
    expect(done.transcript.at(-1)!.text).toContain("summary of it all");
    // The page marks where the compaction happened.
    expect(await html(page, headers)).toMatch(/Compacted here \(asked for\)[^]*\d+ messages summarised into this handover/);
  });

  it("a resubmitted form is one event, and a bad form is a 400 page that says what was wrong", async () => {
    const headers = await signIn();
    const tenant = unique("twice");
    await postMessage(tenant, A, { text: "hello", conversation: "c" });
    await settled(tenant, A, "c");
    const page = conversationPage(tenant, "c");
    const fields = { ...formFields(await html(page, headers), `${page}/messages`), text: "only once" };
    expect((await post(`${page}/messages`, fields, headers)).status).toBe(303);
    const again = await post(`${page}/messages`, fields, headers);
    expect(again.status).toBe(303);
    const shown = await html(again.headers.get("location")!, { cookie: `${headers.cookie}; ${again.headers.get("set-cookie")!.split(";")[0]}` });
    expect(resultOf(shown)).toBe("This form was already sent; nothing more was done.");
    const view = await settled(tenant, A, "c");
    expect(view.transcript.filter((e) => e.text === "only once")).toHaveLength(1);

    const empty = await post(`${page}/messages`, { ...fields, text: "  " }, headers);
    expect(empty.status).toBe(400);
    expect(await empty.text()).toContain("Write a message first.");
  });
});

describe("console: files with a message", () => {
  const E = env as unknown as { LARGE_VALUES: R2Bucket };
  const picture = () => new File([Buffer.from(PNG, "base64")], "dot.png", { type: "image/png" });
  const stored = async (tenant: string) => (await E.LARGE_VALUES.list({ prefix: `images/${tenant}/${A}/` })).objects.map((o) => o.key);

  it("a picture and a text file sent with a new conversation reach a model that takes images: the stored picture's bytes once, the text as text", async () => {
    const headers = await signIn();
    const tenant = unique("cfiles");
    await chooseModels({ [tenant]: "fake-anthropic/claude-sonnet-4-5" });
    await postMessage(tenant, A, { text: "hello", conversation: "seed" });
    const s = unique("cfiles");
    await script(s, [{ text: "A dot, and the answer." }]);
    const start = `${agentPage(tenant)}/conversations`;
    const page = await html(agentPage(tenant), headers);
    expect(page).toContain(`<form method="post" action="${start}" enctype="multipart/form-data">`);
    expect(page).toMatch(/<input type="file" name="files" multiple/);
    // A browser's type it does not know (octet-stream) gives way to the name's extension.
    const notes = new File(["the answer is 42"], "notes.md", { type: "application/octet-stream" });
    const res = await postFiles(start, { ...formFields(page, start), text: `[s:${s}] look` }, [picture(), notes], headers);
    expect(res.status).toBe(303);
    const id = decodeURIComponent(/\/conversations\/([^/?]+)$/.exec(res.headers.get("location")!)![1]!);
    await settled(tenant, A, id);

    const { parts, text } = await sharedWithModel(s);
    expect(parts).toContainEqual(expect.objectContaining({ type: "image", source: { type: "base64", media_type: "image/png", data: PNG } }));
    expect(text).toContain("the answer is 42");
    expect(JSON.stringify((await providerRequests(s))[0]!.body).split(PNG)).toHaveLength(2);
    // Stored once, under the agent and its sha256; what the model saw is those bytes.
    const sha = [...new Uint8Array(await crypto.subtle.digest("SHA-256", Buffer.from(PNG, "base64")))].map((b) => b.toString(16).padStart(2, "0")).join("");
    expect(await stored(tenant)).toEqual([`images/${tenant}/${A}/${sha}`]);
    expect(Buffer.from(await (await E.LARGE_VALUES.get(`images/${tenant}/${A}/${sha}`))!.arrayBuffer()).toString("base64")).toBe(PNG);
    expect((await getConversation(tenant, A, id)).transcript[0]).toMatchObject({ role: "user", by: "console:admin" });
  });

  it("a message with a picture posted twice is one event: one message, one stored picture, one model call, which (a text-only model) is told it cannot see it", async () => {
    const headers = await signIn();
    const tenant = unique("cfiles2");
    const s = unique("c");
    await script(s, [{ text: "hi" }, { text: "a dot" }]);
    await postMessage(tenant, A, { text: `[s:${s}] hello`, conversation: s });
    await settled(tenant, A, s);
    const page = conversationPage(tenant, s);
    const send = `${page}/messages`;
    const fields = { ...formFields(await html(page, headers), send), text: "a picture, once" };
    expect((await postFiles(send, fields, [picture()], headers)).status).toBe(303);
    const again = await postFiles(send, fields, [picture()], headers);
    expect(again.status).toBe(303);
    expect(resultOf(await html(again.headers.get("location")!, { cookie: `${headers.cookie}; ${again.headers.get("set-cookie")!.split(";")[0]}` }))).toBe("This form was already sent; nothing more was done.");
    const view = await settled(tenant, A, s);
    expect(view.transcript.filter((e) => e.text.startsWith("a picture, once")).map((e) => e.text)).toEqual(["a picture, once\n\n[image dot.png (image/png, 70 bytes)]"]);
    expect(await stored(tenant)).toHaveLength(1);
    const requests = await providerRequests(s);
    expect(requests).toHaveLength(2);
    expect((requests[1]!.body.messages as { content: unknown }[]).at(-1)!.content).toEqual([
      { type: "text", text: "a picture, once" },
      { type: "text", text: "\n\n[image dot.png (image/png, 70 bytes)]" },
      { type: "text", text: "(image not shown: this model cannot see images)" },
    ]);
  });

  it("a file past its cap, of a kind the agent cannot read, or too many, is a 4xx page naming the limit; a form with files still needs its token and this console's origin; nothing is written", async () => {
    const headers = await signIn();
    const tenant = unique("cfiles3");
    const start = `${agentPage(tenant)}/conversations`;
    const fields = { _token: await formTokenOf(headers, start), event: crypto.randomUUID(), text: "look" };
    const refusals: [File[], number, string][] = [
      [[new File([new Uint8Array(1024 * 1024 + 1)], "big.png", { type: "image/png" })], 400, "files[0] (big.png): 1048577 bytes, larger than the 1024 KiB the agent reads of an image"],
      [[picture(), new File(["x".repeat(256 * 1024 + 1)], "long.txt", { type: "text/plain" })], 400, "files[1] (long.txt): 262145 bytes, larger than the 256 KiB the agent reads of a text file"],
      [[new File(["PK"], "a.zip", { type: "application/zip" })], 400, "files[0] (a.zip): application/zip: the agent reads text"],
      [Array.from({ length: 11 }, () => picture()), 400, "At most 10 files go with one message."],
      [[new File(["hi"], `${"n".repeat(201)}.txt`, { type: "text/plain" })], 400, "A file&#39;s name is at most 200 characters."],
      // Larger than any message's files could be: not read, and the caps named.
      [[new File([new Uint8Array(1_600_000)], "huge.png", { type: "image/png" })], 413, "a message takes at most 10 files: a picture (PNG, JPEG, GIF, WebP) of at most 1024 KiB, a text file of at most 256 KiB"],
    ];
    for (const [files, status, says] of refusals) {
      const res = await postFiles(start, fields, files, headers);
      expect(res.status, says).toBe(status);
      expect(await res.text()).toContain(says);
    }
    for (const [form, origin] of [[{ ...fields, _token: "" }, ORIGIN], [fields, "https://evil.example"]] as const) {
      expect((await postFiles(start, form, [picture()], headers, origin)).status).toBe(403);
    }
    expect(await agentExists(tenant, A)).toBe(false);
    expect(await stored(tenant)).toEqual([]);
  });
});

describe("console: a second message while the agent works", () => {
  const strategyOf = async (tenant: string) => (await worker(`/v1/tenants/${tenant}/agents/${A}/second-message`, { headers: BEARER })).json();

  it("shows the strategy in effect on the agent's page and sets the agent's own, over its tenant's", async () => {
    const headers = await signIn();
    const tenant = unique("second");
    const put = await worker(`/v1/tenants/${tenant}/second-message`, { method: "PUT", headers: { ...BEARER, "content-type": "application/json" }, body: JSON.stringify({ strategy: "queue" }) });
    expect(put.status).toBe(200);
    const page = agentPage(tenant);
    expect(await html(page, headers)).toContain("Now: queue: it is answered after the current answer (set for its tenant).");

    const action = `${page}/second-message`;
    const { shown } = await submit(page, action, { strategy: "reject" }, headers);
    expect(resultOf(shown)).toBe("A second message while this agent works is now handled by: reject.");
    expect(shown).toContain("Now: reject: the person is asked to send it again once the answer is done (set for this agent).");
    expect(await strategyOf(tenant)).toMatchObject({ effective: "reject", tenant: "queue", agent: "reject" });

    const bad = await post(action, { ...formFields(await html(page, headers), action), strategy: "later" }, headers);
    expect(bad.status).toBe(400);
    expect(await bad.text()).toContain("strategy must be one of steer, queue, interrupt, reject, inherit");
    expect(await strategyOf(tenant)).toMatchObject({ effective: "reject" });

    const back = await submit(page, action, { strategy: "inherit" }, headers);
    expect(back.shown).toContain("Now: queue: it is answered after the current answer (set for its tenant).");
    expect(await strategyOf(tenant)).toMatchObject({ effective: "queue", agent: null });
  });
});

// ---- people ----------------------------------------------------------------------
// People in the console (console/people.ts): "Sign in with Slack" through the
// loopback fake of Slack's OpenID Connect endpoints, roles per tenant checked on
// every page and action (another tenant is a 404), and an approver's click in
// the console signed and audited as that person.
const E = env as unknown as Record<string, string>;
/** Slack workspaces A and B: tenants T1 and T2 (APPROVERS lists U1 for T1). */
const TA = "T1";
const TB = "T2";

async function grant(tenant: string, identity: string, role: string): Promise<void> {
  const res = await worker(`/v1/tenants/${tenant}/roles/${identity}`, { method: "PUT", headers: { ...BEARER, "content-type": "application/json" }, body: JSON.stringify({ role }) });
  expect(res.status).toBe(200);
}

async function pageOf(path: string, headers: Record<string, string>): Promise<{ status: number; text: string }> {
  const res = await worker(path, { headers, redirect: "manual" });
  return { status: res.status, text: await res.text() };
}



async function audit(tenant: string) {
  return ((await (await worker(`/v1/tenants/${tenant}/audit`, { headers: BEARER })).json()) as { entries: { actor: string; action: string; after: unknown }[] }).entries;
}

describe("people in the console", () => {
  it("a tenant admin of A (T1) sees its agents and usage and changes its limit; B (T2) is a 404 by every URL", async () => {
    await grant(TA, "slack:T1:UADMIN", "admin");
    await postMessage(TA, A, { text: "hello", conversation: "seed" });
    await postMessage(TB, A, { text: "hello", conversation: "seed" });
    const me = await signInAs("T1", "UADMIN", "Ada Admin");

    const home = await pageOf("/console", me);
    expect(home.status).toBe(200);
    expect(home.text).toContain(`/console/tenants/${TA}"`);
    expect(home.text).not.toContain(`/console/tenants/${TB}"`);
    const tenant = await pageOf(`/console/tenants/${TA}`, me);
    expect(tenant.text).toContain(`/console/tenants/${TA}/agents/${A}`);
    expect(tenant.text).toContain("Spent today");
    const set = await post(`/console/tenants/${TA}/limits`, { ...formFields(tenant.text, `/console/tenants/${TA}/limits`), dailyUsd: "3" }, me);
    expect(set.status).toBe(303);
    expect(((await (await worker(`/v1/tenants/${TA}/limits`, { headers: BEARER })).json()) as { own: { dailyUsd: number } }).own.dailyUsd).toBe(3);
    expect((await audit(TA)).find((e) => e.action === "limits.set")).toMatchObject({ actor: "slack:T1:UADMIN", after: { dailyUsd: 3 } });

    for (const path of [`/console/tenants/${TB}`, `/console/tenants/${TB}/agents/${A}`, `/console/tenants/${TB}/agents/${A}/conversations/seed`]) {
      expect([path, (await pageOf(path, me)).status]).toEqual([path, 404]);
    }
    for (const path of [`/console/tenants/${TB}/limits`, `/console/tenants/${TB}/agents/${A}/conversations/seed/stop`, `/console/tenants/${TB}/agents/${A}/holds/h1`]) {
      expect([path, (await post(path, { _token: "x", dailyUsd: "0", approve: "1", conversation: "seed" }, me)).status]).toEqual([path, 404]);
      }
  });

  it("a member sees only their conversations, cannot change a limit, and approving signs the hold as themselves", async () => {
    await grant(TA, "slack:T1:U1", "member");
    const me = await signInAs("T1", "U1", "Una Member");
    // Someone else's conversation, with a call held for approval (APPROVERS lists U1 for T1).
    const s = unique("held");
    await script(s, [{ toolCalls: [{ name: "vault__append", arguments: { entry: unique("e") } }] }, { text: "Waiting for approval." }, { text: "Done." }]);
    await postMessage(TA, A, { text: `[s:${s}] record it`, conversation: s });
    await settled(TA, A, s);
    const other = unique("other");
    await postMessage(TA, A, { text: "not yours", conversation: other });

    const agentPage = `/console/tenants/${TA}/agents/${A}`;
    const listed = await pageOf(agentPage, me);
    expect(listed.status).toBe(200);
    expect(listed.text).not.toContain(`/conversations/${other}"`);
    expect((await pageOf(`${agentPage}/conversations/${other}`, me)).status).toBe(404);
    const tenant = await pageOf(`/console/tenants/${TA}`, me);
    expect(tenant.text).not.toContain("Spent today");
    expect((await post(`/console/tenants/${TA}/limits`, { dailyUsd: "0" }, me)).status).toBe(403);

    // Their own conversation, started here, is theirs.
    const started = await post(`${agentPage}/conversations`, { ...formFields(listed.text, `${agentPage}/conversations`), text: "mine" }, me);
    const mine = decodeURIComponent(/\/conversations\/([^/?]+)$/.exec(started.headers.get("location")!)![1]!);
    expect((await pageOf(agentPage, me)).text).toContain(`/conversations/${mine}"`);

    const held = `${agentPage}/conversations/${s}`;
    const shown = await pageOf(held, me);
    expect(shown.status).toBe(200);
    const holdId = (await getConversation(TA, A, s)).holds[0]!.holdId;
    const decided = await post(`${agentPage}/holds/${holdId}`, { ...formFields(shown.text, `${agentPage}/holds/${holdId}`), approve: "1" }, me);
    expect(decided.status).toBe(303);
    await waitFor("the hold performed", async () => (await getConversation(TA, A, s)).holds[0]!.state === "performed");
    expect((await getConversation(TA, A, s)).holds[0]!.decidedBy).toBe("slack:T1:U1");
    // The hold row names the person by the name they signed in with, the identity on hover.
    expect((await pageOf(held, me)).text).toMatch(/<dd class="decided-by"><span class="person" title="slack:T1:U1">Una Member<\/span> at <time/);
    const row = await waitFor("the decision's row", async () => (await audit(TA)).find((e) => e.action === "hold.approve"));
    expect(row).toMatchObject({ actor: "slack:T1:U1", after: { hold: holdId, decision: "approve" } });
  });

  it("a person with no role gets no session; a callback with another state, or an id token for another nonce, is refused", async () => {
    await fetch(`${E.SLACK_SIGN_IN_BASE_URL}/_control/user`, { method: "PUT", body: JSON.stringify({ team: "T9", user: "UNOBODY", name: "Nobody" }) });
    const start = await worker("/console/login/slack", { redirect: "manual" });
    const signin = start.headers.get("set-cookie")!.split(";")[0]!;
    const back = new URL((await fetch(start.headers.get("location")!, { redirect: "manual" })).headers.get("location")!);
    const forged = new URLSearchParams(back.search);
    forged.set("state", "someone-elses");
    expect((await worker(`${back.pathname}?${forged}`, { headers: { cookie: signin } })).status).toBe(400);
    const res = await worker(`${back.pathname}${back.search}`, { headers: { cookie: signin } });
    expect(res.status).toBe(403);
    expect(res.headers.get("set-cookie") ?? "").not.toContain("antiproton_console=");
    // An id token minted for another nonce (the authorization replayed with one of the attacker's) is refused.
    await grant(TA, "slack:T1:UNONCE", "member");
    await fetch(`${E.SLACK_SIGN_IN_BASE_URL}/_control/user`, { method: "PUT", body: JSON.stringify({ team: "T1", user: "UNONCE", name: "N" }) });
    const again = await worker("/console/login/slack", { redirect: "manual" });
    const cookie = again.headers.get("set-cookie")!.split(";")[0]!;
    const authorize = new URL(again.headers.get("location")!);
    authorize.searchParams.set("nonce", "the-attackers-nonce");
    const replayed = new URL((await fetch(authorize, { redirect: "manual" })).headers.get("location")!);
    expect((await worker(`${replayed.pathname}${replayed.search}`, { headers: { cookie } })).status).toBe(401);
  });
});

// ---- a tenant's people, keys and bounds in the console (console/access.tsx) ----
describe("people and keys in the console", () => {
  const roles = async (tenant: string) => ((await (await worker(`/v1/tenants/${tenant}/roles`, { headers: BEARER })).json()) as { roles: { identity: string; role: string }[] }).roles;

  it("a tenant admin gives and takes roles, makes a key (shown once) and revokes it, each audited as them; a member sees none of it and is refused", async () => {
    await grant(TA, "slack:T1:UKEYS", "admin");
    await grant(TA, "slack:T1:UMEMBER", "member");
    const me = await signInAs("T1", "UKEYS", "Kim Keys");
    const tenantPage = `/console/tenants/${TA}`;
    const page = await html(tenantPage, me);
    expect(page).toContain('<section id="people">');
    expect(page).toContain("<code>slack:T1:UMEMBER</code>");

    // A role given and taken away.
    const given = await submit(tenantPage, `${tenantPage}/roles`, { identity: "slack:T1:UNEW", role: "member" }, me);
    expect(resultOf(given.shown)).toBe("slack:T1:UNEW is now member of this tenant.");
    expect(await roles(TA)).toContainEqual(expect.objectContaining({ identity: "slack:T1:UNEW", role: "member" }));
    const bad = await post(`${tenantPage}/roles`, { ...formFields(page, `${tenantPage}/roles`), identity: "U123", role: "member" }, me);
    expect(bad.status).toBe(400);
    expect(await bad.text()).toContain("identity: slack:&lt;team&gt;:&lt;user&gt; or discord:&lt;guild&gt;:&lt;user&gt;");
    const remove = `${tenantPage}/roles/${seg("slack:T1:UNEW")}/remove`;
    await submit(tenantPage, remove, {}, me);
    expect((await roles(TA)).map((r) => r.identity)).not.toContain("slack:T1:UNEW");

    // A key made: shown on the page that answers the form, and nowhere again.
    const keys = `${tenantPage}/keys`;
    const keyFields = { ...formFields(await html(tenantPage, me), keys), name: "ci-read", access: "read", agent: "" };
    const made = await post(keys, keyFields, me);
    expect(made.status).toBe(201);
    const key = /<pre class="new-key">(apk_[A-Za-z0-9_-]+)<\/pre>/.exec(await made.text())![1]!;
    const keyId = /^apk_(k[0-9a-f]{12})_/.exec(key)![1]!;
    // The same form sent again (a reload that posts it) makes no second key.
    const again = await post(keys, keyFields, me);
    expect(again.status).toBe(409);
    expect(await again.text()).toContain(`This form was already sent: key ${keyId} was made then`);
    const listedKeys = ((await (await worker(`/v1/tenants/${TA}/keys`, { headers: BEARER })).json()) as { keys: { name: string }[] }).keys;
    expect(listedKeys.filter((k) => k.name === "ci-read")).toHaveLength(1);
    expect((await worker(`/v1/tenants/${TA}/agents/${A}/conversations`, { headers: { authorization: `Bearer ${key}` } })).status).toBe(200);
    expect((await worker(`/v1/tenants/${TA}/agents/${A}/messages`, { method: "POST", headers: { authorization: `Bearer ${key}`, "content-type": "application/json" }, body: '{"text":"hi"}' })).status).toBe(403);
    const listed = await html(tenantPage, me);
    expect(listed).toContain(`<code>${keyId}</code>`);
    expect(listed).not.toContain(key);
    // Revoked: refused from then on.
    const revoked = await submit(tenantPage, `${keys}/${keyId}/revoke`, {}, me);
    expect(resultOf(revoked.shown)).toBe(`Key &quot;ci-read&quot; (${keyId}) is revoked: it is refused from now on.`);
    expect((await worker(`/v1/tenants/${TA}/agents/${A}/conversations`, { headers: { authorization: `Bearer ${key}` } })).status).toBe(401);

    const trail = await audit(TA);
    for (const action of ["role.set", "role.remove", "key.create", "key.revoke"]) expect(trail.find((e) => e.action === action), action).toMatchObject({ actor: "slack:T1:UKEYS" });

    // A member: none of it shown, every form refused; another tenant's: a 404.
    const member = await signInAs("T1", "UMEMBER", "Mo Member");
    const theirs = await html(tenantPage, member);
    expect(theirs).not.toContain('id="people"');
    expect(theirs).not.toContain('id="keys"');
    for (const path of [`${tenantPage}/roles`, remove, keys, `${keys}/${keyId}/revoke`]) {
      const refused = await post(path, { _token: await formTokenOf(member, path), identity: "slack:T1:UMEMBER", role: "admin", name: "x" }, member);
      expect([path, refused.status, (await refused.text()).includes("Only a tenant admin may see or change this.")]).toEqual([path, 403, true]);
    }
    expect((await roles(TA)).find((r) => r.identity === "slack:T1:UMEMBER")?.role).toBe("member");
    expect((await post(`/console/tenants/${TB}/keys`, { _token: "x", name: "x" }, me)).status).toBe(404);
  });

  it("the platform sets a tenant's bounds on its page; a tenant admin sets a limit only within the ceiling (403 naming it); the platform is not bound", async () => {
    await grant(TA, "slack:T1:UBOUND", "admin");
    const me = await signInAs("T1", "UBOUND", "Bo Bound");
    const tenantPage = `/console/tenants/${TA}`;
    const bounds = `${tenantPage}/bounds`;
    const platform = await signIn();
    // The platform sets them on the tenant's page; a tenant admin has no such form, and a post of theirs is refused.
    await submit(tenantPage, bounds, { maxDailyUsd: "5", models: "" }, platform);
    expect(await (await worker(`/v1/tenants/${TA}/bounds`, { headers: BEARER })).json()).toMatchObject({ maxDailyUsd: 5, models: null });
    expect((await audit(TA)).find((e) => e.action === "bounds.set")).toMatchObject({ actor: "console:admin", after: { maxDailyUsd: 5, models: null } });
    expect(await html(tenantPage, me)).not.toContain('id="bounds"');
    expect((await post(bounds, { _token: await formTokenOf(me, bounds), maxDailyUsd: "500" }, me)).status).toBe(403);
    try {
      const limits = `${tenantPage}/limits`;
      expect(await html(tenantPage, me)).toContain("The platform caps it at 5 USD for this tenant&#39;s admins.");
      const over = await post(limits, { ...formFields(await html(tenantPage, me), limits), dailyUsd: "6" }, me);
      expect(over.status).toBe(403);
      expect(await over.text()).toContain("the platform caps this tenant&#39;s daily spend limit at 5 USD: 6 is above it");
      expect((await post(limits, { ...formFields(await html(tenantPage, me), limits), dailyUsd: "" }, me)).status).toBe(403);
      await submit(tenantPage, limits, { dailyUsd: "4" }, me);
      const own = async () => ((await (await worker(`/v1/tenants/${TA}/limits`, { headers: BEARER })).json()) as { own: { dailyUsd: number } }).own.dailyUsd;
      expect(await own()).toBe(4);
      await submit(tenantPage, limits, { dailyUsd: "50" }, platform);
      expect(await own()).toBe(50);
    } finally {
      expect((await worker(`/v1/tenants/${TA}/bounds`, { method: "DELETE", headers: BEARER })).status).toBe(200);
    }
  });
});

/** The token the session's page would carry for a form posting to `action` (console/session.ts): a member's pages have no such form to read it from. */
async function formTokenOf(headers: Headers, action: string): Promise<string> {
  const id = decodeURIComponent(headers.cookie!.slice("antiproton_console=".length)).split(".")[0]!;
  return hmacHex(await hmacHex(TOKEN, "antiproton-console-cookie"), `form\n${id}\n${action}`);
}

describe("a conversation's usage", () => {
  it("its page shows today's and the last 30 days' calls, tokens with the cached share, and cost, from its own job rows", async () => {
    const tenant = unique("convusage");
    const s = unique("usage");
    await script(s, [
      { toolCalls: [{ name: "clock__now", arguments: {} }], usage: { input: 1000, cached: 0, output: 1 } },
      { toolCalls: [{ name: "clock__now", arguments: {} }], usage: { input: 100, cached: 200, output: 20 } },
      { text: "It is now.", usage: { input: 50, cached: 150, output: 5 } },
    ]);
    await postMessage(tenant, A, { text: `[s:${s}] what time is it?`, conversation: s });
    await settled(tenant, A, s);
    // The first call 40 days ago (outside both windows), the second 3 days ago (in the 30 days only).
    await runInDurableObject(agent(tenant, A), (_instance, state) => {
      const ids = state.storage.sql.exec<{ id: string }>("SELECT id FROM model_jobs WHERE conversation = ? AND model IS NOT NULL ORDER BY rowid", s).toArray().map((r) => r.id);
      expect(ids).toHaveLength(3);
      state.storage.sql.exec("UPDATE model_jobs SET created_at = ? WHERE id = ?", Date.now() - 40 * 86_400_000, ids[0]!);
      state.storage.sql.exec("UPDATE model_jobs SET created_at = ? WHERE id = ?", Date.now() - 3 * 86_400_000, ids[1]!);
    });
    const page = await html(conversationPage(tenant, s), await signIn());
    const table = /<table class="usage-summary conversation-usage">([\s\S]*?)<\/table>/.exec(page)![1]!;
    const rows = [...table.matchAll(/<tr><td>([^<]+)<\/td>((?:<td class="num">[^<]*<\/td>)+)<\/tr>/g)].map((m) => [m[1], ...[...m[2]!.matchAll(/<td class="num">([^<]*)<\/td>/g)].map((c) => c[1])]);
    const { usage } = await getConversation(tenant, A, s);
    expect(rows).toEqual([
      ["Today", "1", "200", "75%", "5", usd((usage as unknown as { today: { cost: number } }).today.cost)],
      ["Last 30 days", "2", "500", "70%", "25", usd((usage as unknown as { last30Days: { cost: number } }).last30Days.cost)],
    ]);
  });
});

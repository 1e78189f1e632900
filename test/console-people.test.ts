// People in the console (console/people.ts): "Sign in with Slack" through the
// loopback fake of Slack's OpenID Connect endpoints, roles per tenant checked on
// every page and action (another tenant is a 404), and an approver's click in
// the console signed and audited as that person.
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { getConversation, postMessage, script, settled, unique, waitFor, worker } from "./support.ts";

const E = env as unknown as Record<string, string>;
const ADMIN = { authorization: "Bearer test-admin-token" };
const A = "T1";
const B = "T2";
const AGENT = "clerk";
const ORIGIN = "http://antiproton.test";

async function grant(tenant: string, identity: string, role: string): Promise<void> {
  const res = await worker(`/v1/tenants/${tenant}/roles/${identity}`, { method: "PUT", headers: { ...ADMIN, "content-type": "application/json" }, body: JSON.stringify({ role }) });
  expect(res.status).toBe(200);
}

/** Signs in through the fake as a browser would follow it; returns the session cookie. */
async function signInAs(team: string, user: string, name: string): Promise<{ cookie: string }> {
  await fetch(`${E.SLACK_SIGN_IN_BASE_URL}/_control/user`, { method: "PUT", body: JSON.stringify({ team, user, name }) });
  const start = await worker("/console/login/slack", { redirect: "manual" });
  expect(start.status).toBe(303);
  const signin = start.headers.get("set-cookie")!.split(";")[0]!;
  const atSlack = await fetch(start.headers.get("location")!, { redirect: "manual" });
  expect(atSlack.status).toBe(302);
  const back = new URL(atSlack.headers.get("location")!);
  const done = await worker(`${back.pathname}${back.search}`, { headers: { cookie: signin } });
  expect(done.status, await done.clone().text()).toBe(200);
  const session = done.headers.getSetCookie().find((c) => c.startsWith("antiproton_console="))!;
  return { cookie: session.split(";")[0]! };
}

async function page(path: string, headers: Record<string, string>): Promise<{ status: number; text: string }> {
  const res = await worker(path, { headers, redirect: "manual" });
  return { status: res.status, text: await res.text() };
}

function formFields(html: string, action: string): Record<string, string> {
  const start = html.indexOf(`<form method="post" action="${action}"`);
  expect(start, `a form posting to ${action}`).toBeGreaterThanOrEqual(0);
  const form = html.slice(start, html.indexOf("</form>", start));
  return Object.fromEntries([...form.matchAll(/<input type="hidden" name="([^"]+)" value="([^"]*)"/g)].map((m) => [m[1]!, m[2]!]));
}

function post(path: string, fields: Record<string, string>, headers: Record<string, string>): Promise<Response> {
  return worker(path, { method: "POST", headers: { "content-type": "application/x-www-form-urlencoded", origin: ORIGIN, ...headers }, body: new URLSearchParams(fields).toString(), redirect: "manual" });
}

async function audit(tenant: string) {
  return ((await (await worker(`/v1/tenants/${tenant}/audit`, { headers: ADMIN })).json()) as { entries: { actor: string; action: string; after: unknown }[] }).entries;
}

describe("people in the console", () => {
  it("a tenant admin of A sees A's agents and usage and changes A's limit; B is a 404 by every URL", async () => {
    await grant(A, "slack:T1:UADMIN", "admin");
    await postMessage(A, AGENT, { text: "hello", conversation: "seed" });
    await postMessage(B, AGENT, { text: "hello", conversation: "seed" });
    const me = await signInAs("T1", "UADMIN", "Ada Admin");

    const home = await page("/console", me);
    expect(home.status).toBe(200);
    expect(home.text).toContain(`/console/tenants/${A}"`);
    expect(home.text).not.toContain(`/console/tenants/${B}"`);
    const tenant = await page(`/console/tenants/${A}`, me);
    expect(tenant.text).toContain(`/console/tenants/${A}/agents/${AGENT}`);
    expect(tenant.text).toContain("Spent today");
    const set = await post(`/console/tenants/${A}/limits`, { ...formFields(tenant.text, `/console/tenants/${A}/limits`), dailyUsd: "3" }, me);
    expect(set.status).toBe(303);
    expect(((await (await worker(`/v1/tenants/${A}/limits`, { headers: ADMIN })).json()) as { own: { dailyUsd: number } }).own.dailyUsd).toBe(3);
    expect((await audit(A)).find((e) => e.action === "limits.set")).toMatchObject({ actor: "slack:T1:UADMIN", after: { dailyUsd: 3 } });

    for (const path of [`/console/tenants/${B}`, `/console/tenants/${B}/agents/${AGENT}`, `/console/tenants/${B}/agents/${AGENT}/conversations/seed`]) {
      expect([path, (await page(path, me)).status]).toEqual([path, 404]);
    }
    for (const path of [`/console/tenants/${B}/limits`, `/console/tenants/${B}/agents/${AGENT}/conversations/seed/stop`, `/console/tenants/${B}/agents/${AGENT}/holds/h1`]) {
      expect([path, (await post(path, { _token: "x", dailyUsd: "0", approve: "1", conversation: "seed" }, me)).status]).toEqual([path, 404]);
      }
  });

  it("a member sees only their conversations, cannot change a limit, and approving signs the hold as themselves", async () => {
    await grant(A, "slack:T1:U1", "member");
    const me = await signInAs("T1", "U1", "Una Member");
    // Someone else's conversation, with a call held for approval (APPROVERS lists U1 for T1).
    const s = unique("held");
    await script(s, [{ toolCalls: [{ name: "vault__append", arguments: { entry: unique("e") } }] }, { text: "Waiting for approval." }, { text: "Done." }]);
    await postMessage(A, AGENT, { text: `[s:${s}] record it`, conversation: s });
    await settled(A, AGENT, s);
    const other = unique("other");
    await postMessage(A, AGENT, { text: "not yours", conversation: other });

    const agentPage = `/console/tenants/${A}/agents/${AGENT}`;
    const listed = await page(agentPage, me);
    expect(listed.status).toBe(200);
    expect(listed.text).not.toContain(`/conversations/${other}"`);
    expect((await page(`${agentPage}/conversations/${other}`, me)).status).toBe(404);
    const tenant = await page(`/console/tenants/${A}`, me);
    expect(tenant.text).not.toContain("Spent today");
    expect((await post(`/console/tenants/${A}/limits`, { dailyUsd: "0" }, me)).status).toBe(403);

    // Their own conversation, started here, is theirs.
    const started = await post(`${agentPage}/conversations`, { ...formFields(listed.text, `${agentPage}/conversations`), text: "mine" }, me);
    const mine = decodeURIComponent(/\/conversations\/([^/?]+)$/.exec(started.headers.get("location")!)![1]!);
    expect((await page(agentPage, me)).text).toContain(`/conversations/${mine}"`);

    const held = `${agentPage}/conversations/${s}`;
    const shown = await page(held, me);
    expect(shown.status).toBe(200);
    const holdId = (await getConversation(A, AGENT, s)).holds[0]!.holdId;
    const decided = await post(`${agentPage}/holds/${holdId}`, { ...formFields(shown.text, `${agentPage}/holds/${holdId}`), approve: "1" }, me);
    expect(decided.status).toBe(303);
    await waitFor("the hold performed", async () => (await getConversation(A, AGENT, s)).holds[0]!.state === "performed");
    expect((await getConversation(A, AGENT, s)).holds[0]!.decidedBy).toBe("slack:T1:U1");
    expect((await page(held, me)).text).toMatch(/<dd class="decided-by">slack:T1:U1 at <time/);
    expect((await audit(A)).find((e) => e.action === "hold.approve")).toMatchObject({ actor: "slack:T1:U1", after: { hold: holdId, decision: "approve" } });
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
    await grant(A, "slack:T1:UNONCE", "member");
    await fetch(`${E.SLACK_SIGN_IN_BASE_URL}/_control/user`, { method: "PUT", body: JSON.stringify({ team: "T1", user: "UNONCE", name: "N" }) });
    const again = await worker("/console/login/slack", { redirect: "manual" });
    const cookie = again.headers.get("set-cookie")!.split(";")[0]!;
    const authorize = new URL(again.headers.get("location")!);
    authorize.searchParams.set("nonce", "the-attackers-nonce");
    const replayed = new URL((await fetch(authorize, { redirect: "manual" })).headers.get("location")!);
    expect((await worker(`${replayed.pathname}${replayed.search}`, { headers: { cookie } })).status).toBe(401);
  });
});

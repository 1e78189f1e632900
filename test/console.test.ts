// The web console: ADMIN_TOKEN sign-in (a cookie that is not the token, or a
// bearer header), pages with every value escaped, and holds signed from a card
// only where the tenant's APPROVERS name console:admin.
import { exports } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { getConversation, ledgerAppends, postMessage, script, settled, unique, waitFor, worker } from "./support.ts";

const TOKEN = "test-admin-token";
const BEARER = { authorization: `Bearer ${TOKEN}` };
const FORM = { "content-type": "application/x-www-form-urlencoded" };
const A = "clerk";

async function expectedCookie(): Promise<string> {
  const enc = new TextEncoder();
  const key = await crypto.subtle.importKey("raw", enc.encode(TOKEN), { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
  const mac = new Uint8Array(await crypto.subtle.sign("HMAC", key, enc.encode("antiproton-console")));
  return Array.from(mac, (b) => b.toString(16).padStart(2, "0")).join("");
}

function login(token: string, origin = "http://antiproton.test"): Promise<Response> {
  return exports.default.fetch(new Request(`${origin}/console/login`, { method: "POST", headers: FORM, body: new URLSearchParams({ token }).toString(), redirect: "manual" }));
}

async function session(): Promise<Record<string, string>> {
  const cookie = (await login(TOKEN)).headers.get("set-cookie")!.split(";")[0]!;
  return { cookie };
}

async function html(path: string, headers: Record<string, string>): Promise<string> {
  const res = await worker(path, { headers });
  expect(res.status).toBe(200);
  return res.text();
}

function decide(tenant: string, holdId: string, conversation: string, approve: boolean, headers: Record<string, string>): Promise<Response> {
  return worker(`/console/tenants/${tenant}/agents/${A}/holds/${holdId}`, {
    method: "POST",
    headers: { ...FORM, ...headers },
    body: new URLSearchParams({ conversation, approve: approve ? "1" : "0" }).toString(),
    redirect: "manual",
  });
}

/** A turn whose model asks for the gated vault__append of an entry with markup in it. */
async function heldTurn(tenant: string) {
  const s = unique("console");
  const entry = `<script>alert(1)</script>${unique("e")}`;
  await script(s, [{ toolCalls: [{ name: "vault__append", arguments: { entry } }] }, { text: "Waiting for approval." }, { text: "Done." }]);
  await postMessage(tenant, A, { text: `[s:${s}] please record ${entry}`, conversation: s });
  await settled(tenant, A, s);
  const holdId = (await getConversation(tenant, A, s)).holds[0]!.holdId;
  return { s, entry, holdId, page: `/console/tenants/${tenant}/agents/${A}/conversations/${s}` };
}

describe("console sign-in", () => {
  it("without a session: a GET is sent to sign in (303), a POST is refused (401)", async () => {
    for (const path of ["/console", "/console/tenants/console_ok/agents/clerk", "/console/tenants/console_ok/agents/clerk/conversations/x"]) {
      const res = await worker(path, { redirect: "manual" });
      expect(res.status).toBe(303);
      expect(res.headers.get("location")).toBe("/console/login");
    }
    expect((await decide("console_ok", "h1", "x", true, {})).status).toBe(401);
    expect((await decide("console_ok", "h1", "x", true, { cookie: "antiproton_console=forged" })).status).toBe(401);
    const form = await worker("/console/login");
    expect(form.status).toBe(200);
    expect(await form.text()).toContain('name="token"');
  });

  it("a wrong token gets the form again with 401 and no cookie", async () => {
    const res = await login("not-the-token");
    expect(res.status).toBe(401);
    expect(res.headers.get("set-cookie")).toBeNull();
    const body = await res.text();
    expect(body).toContain("That is not the admin token.");
    expect(body).toContain('name="token"');
  });

  it("the right token sets an HttpOnly, Secure, SameSite=Strict cookie on /console holding an HMAC, not the token", async () => {
    const res = await login(TOKEN);
    expect(res.status).toBe(303);
    expect(res.headers.get("location")).toBe("/console");
    const cookie = res.headers.get("set-cookie")!;
    expect(cookie).not.toContain(TOKEN);
    expect(cookie.split(";")[0]).toBe(`antiproton_console=${await expectedCookie()}`);
    expect(cookie).toMatch(/HttpOnly/);
    expect(cookie).toMatch(/Secure/);
    expect(cookie).toMatch(/SameSite=Strict/);
    expect(cookie).toMatch(/Path=\/console(;|$)/);
    // Plain http on loopback (wrangler dev) cannot keep a Secure cookie.
    const local = (await login(TOKEN, "http://127.0.0.1:8787")).headers.get("set-cookie")!;
    expect(local).not.toMatch(/Secure/);
    expect(await html("/console", await session())).toContain('name="tenant"');
  });

  it("a bearer header works as well as the cookie", async () => {
    expect(await html("/console", BEARER)).toContain("Open an agent");
    const res = await worker("/console?tenant=console_ok&agent=clerk", { headers: BEARER, redirect: "manual" });
    expect(res.status).toBe(303);
    expect(res.headers.get("location")).toBe("/console/tenants/console_ok/agents/clerk");
  });

  it("bad names are 400 and an unknown conversation is 404, as pages", async () => {
    const bad = await worker("/console/tenants/bad%20name/agents/clerk", { headers: BEARER });
    expect(bad.status).toBe(400);
    expect(bad.headers.get("content-type")).toMatch(/text\/html/);
    expect((await worker("/console/tenants/console_ok/agents/clerk/conversations/nope", { headers: BEARER })).status).toBe(404);
  });
});

describe("console holds", () => {
  it("shows the transcript and the card escaped; Approve where APPROVERS lists console:admin performs the call once", async () => {
    const headers = await session();
    const { s, entry, holdId, page } = await heldTurn("console_ok");
    expect(await html(`/console/tenants/console_ok/agents/${A}`, headers)).toContain(`href="${page}"`);
    const before = await html(page, headers);
    expect(before).not.toContain("<script>");
    expect(before).toContain("&lt;script&gt;alert(1)&lt;/script&gt;");
    expect(before).toContain("Waiting for approval.");
    expect(before).toMatch(/<pre class="arguments">\{\n {2}&quot;entry&quot;: &quot;&lt;script&gt;/);
    expect(before).toContain('name="approve" value="1"');
    expect(before).toContain('name="approve" value="0"');

    const res = await decide("console_ok", holdId, s, true, headers);
    expect(res.status).toBe(303);
    const back = res.headers.get("location")!;
    expect(back).toBe(`${page}?notice=${encodeURIComponent("Approved. Performing it now.")}`);
    expect(await html(back, headers)).toContain('<p class="notice" role="status">Approved. Performing it now.</p>');

    const after = await waitFor("the card to show performed", async () => {
      const body = await html(page, headers);
      return body.includes('class="card performed"') ? body : undefined;
    });
    expect(after).toContain("Decided by</dt><dd>console at ");
    expect(after).not.toContain('name="approve"');
    expect(await ledgerAppends(entry)).toHaveLength(1);
  });

  it("where APPROVERS does not list console:admin, Approve is refused: the hold stays pending, nothing is performed", async () => {
    const { s, entry, holdId, page } = await heldTurn("console_no");
    const res = await decide("console_no", holdId, s, true, BEARER);
    expect(res.status).toBe(303);
    const shown = await html(res.headers.get("location")!, BEARER);
    expect(shown).toContain("You are not allowed to decide this approval. It is still waiting.");
    expect(shown).toContain('name="approve" value="1"');
    expect((await getConversation("console_no", A, s)).holds[0]!.state).toBe("pending");
    expect(await ledgerAppends(entry)).toHaveLength(0);
    expect(await html(page, BEARER)).toContain('class="card pending"');
  });
});

// A tenant names only its own secrets (invariant 5): a mount's `secret_ref`
// and a model choice's `secret` set by a tenant resolve in the tenant's own
// sealed store (or a Worker secret the platform granted it), never in the
// Worker's environment; the platform's settings may name Worker secrets, but
// never the runtime's own. Each door is tried with the environment's secrets
// as canaries: the receiver and the provider must never see one.
import { env } from "cloudflare:workers";
import { runInDurableObject } from "cloudflare:test";
import { afterEach, describe, expect, it, vi } from "vitest";
import { changeSetting, controlPlane } from "../../../runtime/index.ts";
import { tenantStub } from "../../../runtime/control/index.ts";
import { RUNTIME_SECRETS } from "../../../lib/config.ts";
import { storedText } from "../../agents.ts";
import { captureConsole } from "../../leaks.ts";
import { consoleCookie, getConversation, providerRequests, script, settled, unique, worker } from "../../support.ts";

const E = env as unknown as Record<string, string>;
const ADMIN = "Bearer test-admin-token";
const REMOTE = E.FAKE_REMOTE_URL!;
const INBOX = `${REMOTE}/inbox`;

/** Every secret value the Worker's environment holds: none may reach a receiver or a provider but the platform's own. */
const WORKER_SECRETS = [...RUNTIME_SECRETS.map((name) => E[name]), E.GITHUB_TOKEN, E.REMOTE_API_TOKEN, E.FAKE_PROVIDER_KEY, E.FAKE_TENANT_KEY, E.MCP_API_TOKEN].filter((v): v is string => !!v);

afterEach(() => vi.restoreAllMocks());

function call(auth: string, method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<Response> {
  return worker(`/v1${path}`, {
    method,
    headers: { authorization: auth, ...(body === undefined ? {} : { "content-type": "application/json" }), ...headers },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
}

async function newKey(tenant: string, spec: { name: string; access?: string; agent?: string }): Promise<string> {
  const res = await call(ADMIN, "POST", `/tenants/${tenant}/keys`, spec);
  expect(res.status, await res.clone().text()).toBe(201);
  return `Bearer ${((await res.json()) as { key: string }).key}`;
}

/** An http mount that may post anywhere on the receiver's host, unasked: the attack's shape. */
const poster = (secret_ref: string) => ({ alias: "vault", plugin: "http", config: { allowedHosts: [new URL(REMOTE).host] }, secret_ref, policy: { tools: { post: "allow", get: "allow" } } });

/** What the receiver got with `marker`; never, in any test here, a Worker secret but a granted one. */
async function inbox(marker: string): Promise<{ authorization: string; body: string }[]> {
  const all = (await (await fetch(`${REMOTE}/_control/inbox`)).json()) as { authorization: string; body: string }[];
  const got = all.filter((r) => r.body.includes(marker));
  expect(got.flatMap((r) => WORKER_SECRETS.filter((s) => s !== E.GITHUB_TOKEN && r.authorization.includes(s)))).toEqual([]);
  return got;
}

/** Scripts a turn that posts `marker` to the receiver through mount "vault", then answers. */
async function postingTurn(marker: string): Promise<string> {
  const s = unique("post");
  await script(s, [{ toolCalls: [{ name: "vault__post", arguments: { url: INBOX, body: { marker } } }] }, { text: "posted" }]);
  return s;
}

async function send(auth: string, tenant: string, agent: string, s: string): Promise<void> {
  const res = await call(auth, "POST", `/tenants/${tenant}/agents/${agent}/messages`, { text: `[s:${s}] Please post hello to ${INBOX}`, conversation: s });
  expect(res.status, await res.clone().text()).toBe(202);
}

const toolResult = (view: Awaited<ReturnType<typeof settled>>) => view.transcript.find((e) => e.role === "tool");

describe("a tenant names only its own secrets: each door", () => {
  it("agent mounts with a write key: a Worker secret is refused when set, and a mount an older release kept is refused at its use; the platform is shown it", async () => {
    const tenant = unique("alpha");
    const write = await newKey(tenant, { name: "w", access: "write" });
    for (const name of ["ADMIN_TOKEN", "GITHUB_TOKEN", "FAKE_PROVIDER_KEY"]) {
      const res = await call(write, "PUT", `/tenants/${tenant}/agents/other/mounts`, [poster(name)]);
      expect(res.status).toBe(400);
      expect(((await res.json()) as { error: string }).error).toMatch(new RegExp(`names the secret ${name}, which tenant ${tenant} has not set: set it with PUT /v1/tenants/${tenant}/secrets/${name} \\(a Worker secret is named only by the platform`));
    }
    // As a tenant's mount written before this rule: refused at its next use, nothing sent.
    await changeSetting(env, "mounts", { tenant, agent: "other" }, "agent", [poster("ADMIN_TOKEN")]);
    const marker = unique("m");
    const s = await postingTurn(marker);
    await send(write, tenant, "other", s);
    const view = await settled(tenant, "other", s);
    expect(toolResult(view)).toMatchObject({ isError: true });
    expect(toolResult(view)!.text).toMatch(/vault__post is not configured: mount "vault" names the secret ADMIN_TOKEN, which tenant .* has not set/);
    expect(await inbox(marker)).toEqual([]);
    const refs = (await (await call(ADMIN, "GET", "/secret-refs")).json()) as { refs: unknown[] };
    expect(refs.refs).toContainEqual({ tenant, agent: "other", setting: "mounts", alias: "vault", secret: "ADMIN_TOKEN" });
    // A tenant's key may not read that list.
    expect((await call(write, "GET", "/secret-refs")).status).toBe(403);
  });

  it("the tenant's mounts route: the same rule", async () => {
    const tenant = unique("alpha");
    const write = await newKey(tenant, { name: "w", access: "write" });
    const res = await call(write, "PUT", `/tenants/${tenant}/mounts`, [poster("ADMIN_TOKEN")]);
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: string }).error).toMatch(/names the secret ADMIN_TOKEN, which tenant .* has not set/);
    await changeSetting(env, "mounts", { tenant, agent: "any" }, "tenant", [poster("GITHUB_TOKEN")]);
    const marker = unique("m");
    const s = await postingTurn(marker);
    await send(write, tenant, "helper", s);
    expect(toolResult(await settled(tenant, "helper", s))!.text).toMatch(/names the secret GITHUB_TOKEN, which tenant .* has not set/);
    expect(await inbox(marker)).toEqual([]);
  });

  it("an agent-scoped key and /v1/responses: a Worker secret is refused; the tenant's own secret is what the receiver gets", async () => {
    const tenant = unique("alpha");
    const scoped = await newKey(tenant, { name: "one", agent: "other" });
    expect((await call(scoped, "PUT", `/tenants/${tenant}/agents/other/mounts`, [poster("ADMIN_TOKEN")])).status).toBe(400);
    // A key for one agent sets no tenant-wide secret.
    expect((await call(scoped, "PUT", `/tenants/${tenant}/secrets/INBOX_TOKEN`, { value: "x" })).status).toBe(403);
    const own = `own-${unique("v")}`;
    const write = await newKey(tenant, { name: "w" });
    expect((await call(write, "PUT", `/tenants/${tenant}/secrets/INBOX_TOKEN`, { value: own })).status).toBe(200);
    expect((await call(scoped, "PUT", `/tenants/${tenant}/agents/other/mounts`, [poster("INBOX_TOKEN")])).status).toBe(200);
    const marker = unique("m");
    const s = await postingTurn(marker);
    const res = await call(scoped, "POST", "/responses", { model: "gpt-4o", input: `[s:${s}] Please post hello to ${INBOX}` });
    const text = await res.text();
    expect(res.status, text).toBe(200);
    expect(text).not.toContain(own);
    expect((await inbox(marker)).map((r) => r.authorization)).toEqual([`Bearer ${own}`]);
  });

  it("a model choice's secret: a tenant's names only its own key, the platform's never the runtime's own", async () => {
    const tenant = unique("alpha");
    const write = await newKey(tenant, { name: "w" });
    const choose = (auth: string, secret: string) => call(auth, "PATCH", `/tenants/${tenant}/agents/x`, { model: { model: "fake/test-model", secret } });
    expect((await call(ADMIN, "POST", `/tenants/${tenant}/agents`, { agent: "x" })).status).toBe(201);
    for (const name of ["ADMIN_TOKEN", "FAKE_PROVIDER_KEY"]) {
      const res = await choose(write, name);
      expect(res.status).toBe(400);
      expect(((await res.json()) as { error: string }).error).toMatch(new RegExp(`the model choice names the secret ${name}, which tenant`));
    }
    const platform = await choose(ADMIN, "ADMIN_TOKEN");
    expect(platform.status).toBe(400);
    expect(((await platform.json()) as { error: string }).error).toMatch(/the model choice names ADMIN_TOKEN, one of the runtime's own secrets/);
    // The tenant's own key, by value: the provider sees it.
    expect((await call(write, "PUT", `/tenants/${tenant}/secrets/MY_MODEL_KEY`, { value: E.FAKE_TENANT_KEY })).status).toBe(200);
    expect((await choose(write, "MY_MODEL_KEY")).status).toBe(200);
    const s = unique("byok");
    await script(s, [{ text: "on my own key" }]);
    expect((await call(write, "POST", `/tenants/${tenant}/agents/x/messages`, { text: `[s:${s}] hi`, conversation: s })).status).toBe(202);
    expect((await settled(tenant, "x", s)).transcript.at(-1)).toMatchObject({ role: "assistant", text: "on my own key" });
    expect((await providerRequests(s)).map((r) => [r.authorized, r.key])).toEqual([[true, "tenant"]]);
    // A choice an older release kept naming the operator's key: refused at its use, the provider never asked.
    await changeSetting(env, "models", { tenant, agent: "x" }, "agent", { model: "fake/test-model", secret: "FAKE_PROVIDER_KEY" });
    const t = unique("byok");
    await script(t, [{ text: "never" }]);
    expect((await call(write, "POST", `/tenants/${tenant}/agents/x/messages`, { text: `[s:${t}] hi`, conversation: t })).status).toBe(202);
    const failed = await settled(tenant, "x", t);
    expect(failed.error).toMatch(/not configured: the model choice names the secret FAKE_PROVIDER_KEY, which tenant .* has not set/);
    expect(await providerRequests(t)).toEqual([]);
  });
});

describe("a tenant's own secret", () => {
  it("set by value through /v1 is used by its mount and appears nowhere else: answers, transcript, trail, logs, SQLite in clear; no key reads it back; another tenant cannot name it", async () => {
    const lines = captureConsole();
    const tenant = unique("alpha");
    const other = unique("beta");
    const admin = await newKey(tenant, { name: "a", access: "admin" });
    const own = `own-secret-${unique("v")}`;
    const set = await call(admin, "PUT", `/tenants/${tenant}/secrets/INBOX_TOKEN`, { value: own });
    const setText = await set.text();
    expect(set.status, setText).toBe(200);
    expect(JSON.parse(setText)).toMatchObject({ ok: true, secret: { name: "INBOX_TOKEN", updatedBy: expect.stringMatching(/^key:/) } });
    expect((await call(admin, "PUT", `/tenants/${tenant}/agents/helper/mounts`, [poster("INBOX_TOKEN")])).status).toBe(200);
    // The remote echoes what it was sent: the tool result the model reads is redacted.
    const marker = unique("m");
    const s = unique("own");
    await script(s, [{ toolCalls: [{ name: "vault__post", arguments: { url: INBOX, body: { marker } } }, { name: "vault__get", arguments: { url: `${REMOTE}/echo` } }] }, { echoToolResults: true }]);
    await send(admin, tenant, "helper", s);
    const view = await settled(tenant, "helper", s);
    expect((await inbox(marker)).map((r) => r.authorization)).toEqual([`Bearer ${own}`]);

    const read = (path: string) => call(admin, "GET", path).then((r) => r.text());
    const places: Record<string, string> = {
      conversation: JSON.stringify(await getConversation(tenant, "helper", s)),
      transcript: JSON.stringify(view),
      list: await read(`/tenants/${tenant}/secrets`),
      audit: await read(`/tenants/${tenant}/audit`),
      mounts: await read(`/tenants/${tenant}/agents/helper/mounts`),
      follow: await followed(admin, `/tenants/${tenant}/agents/helper/conversations/${s}/events`),
      modelRequests: JSON.stringify(await providerRequests(s)),
      agentTables: await storedText(tenant, "helper"),
      tenantTables: await tenantTables(tenant),
      controlPlane: await tableRows(controlPlane(env)),
      logs: lines.join("\n"),
      console: await consolePage(tenant),
    };
    expect(JSON.parse(places.list!)).toMatchObject({ secrets: [{ name: "INBOX_TOKEN" }] });
    expect(places.audit).toContain("secret.set");
    expect(places.follow).toContain("event: done");
    expect(places.tenantTables).toContain("INBOX_TOKEN");
    expect(places.console).toContain("INBOX_TOKEN");
    const leaked = Object.entries(places).filter(([, text]) => text.includes(own)).map(([place]) => place);
    expect(leaked).toEqual([]);

    // Another tenant cannot name it: refused when set, and at use.
    const otherKey = await newKey(other, { name: "w" });
    expect((await call(otherKey, "PUT", `/tenants/${other}/agents/helper/mounts`, [poster("INBOX_TOKEN")])).status).toBe(400);
    await changeSetting(env, "mounts", { tenant: other, agent: "helper" }, "agent", [poster("INBOX_TOKEN")]);
    const marker2 = unique("m");
    const s2 = await postingTurn(marker2);
    await send(otherKey, other, "helper", s2);
    expect(toolResult(await settled(other, "helper", s2))!.text).toMatch(/names the secret INBOX_TOKEN, which tenant .* has not set/);
    expect(await inbox(marker2)).toEqual([]);
    // Nor can another tenant's key list or change it.
    expect((await call(otherKey, "GET", `/tenants/${tenant}/secrets`)).status).toBe(404);
    expect((await call(otherKey, "DELETE", `/tenants/${tenant}/secrets/INBOX_TOKEN`)).status).toBe(404);
  });

  it("rotated and deleted: the next call uses the new value, then is refused; a read-only key lists names only and changes nothing", async () => {
    const tenant = unique("alpha");
    const write = await newKey(tenant, { name: "w" });
    const reader = await newKey(tenant, { name: "r", access: "read" });
    expect((await call(write, "PUT", `/tenants/${tenant}/secrets/INBOX_TOKEN`, { value: "first" })).status).toBe(200);
    expect((await call(write, "PUT", `/tenants/${tenant}/agents/helper/mounts`, [poster("INBOX_TOKEN")])).status).toBe(200);
    const rotated = await call(write, "PUT", `/tenants/${tenant}/secrets/INBOX_TOKEN`, { value: "second" });
    const listing = ((await rotated.json()) as { secret: { createdAt: string; updatedAt: string } }).secret;
    expect(listing.updatedAt >= listing.createdAt).toBe(true);
    const marker = unique("m");
    await send(write, tenant, "helper", await postingTurn(marker));
    await waitForInbox(marker);
    expect((await inbox(marker)).map((r) => r.authorization)).toEqual(["Bearer second"]);
    expect((await call(reader, "PUT", `/tenants/${tenant}/secrets/INBOX_TOKEN`, { value: "third" })).status).toBe(403);
    expect(await (await call(reader, "GET", `/tenants/${tenant}/secrets`)).json()).toMatchObject({ secrets: [{ name: "INBOX_TOKEN" }] });
    expect((await call(write, "DELETE", `/tenants/${tenant}/secrets/INBOX_TOKEN`)).status).toBe(200);
    expect((await call(write, "DELETE", `/tenants/${tenant}/secrets/INBOX_TOKEN`)).status).toBe(404);
    const marker2 = unique("m");
    const s2 = await postingTurn(marker2);
    await send(write, tenant, "helper", s2);
    expect(toolResult(await settled(tenant, "helper", s2))!.text).toMatch(/names the secret INBOX_TOKEN, which tenant .* has not set/);
    expect(await inbox(marker2)).toEqual([]);
    // Bad input: a name that is no secret's, an empty value.
    expect((await call(write, "PUT", `/tenants/${tenant}/secrets/lower`, { value: "x" })).status).toBe(400);
    expect((await call(write, "PUT", `/tenants/${tenant}/secrets/OK_NAME`, { value: "" })).status).toBe(400);
  });

  it("set by value in the console: listed by name, used by the mount, never shown", async () => {
    const tenant = unique("alpha");
    // The tenant exists for the console once an agent of it does.
    expect((await call(ADMIN, "POST", `/tenants/${tenant}/agents`, { agent: "helper", mounts: [] })).status).toBe(201);
    const cookie = await consoleCookie();
    const page = await (await worker(`/console/tenants/${tenant}`, { headers: { cookie } })).text();
    const action = `/console/tenants/${tenant}/secrets`;
    const token = new RegExp(`action="${action}"><input type="hidden" name="_token" value="([0-9a-f]+)"`).exec(page)?.[1];
    expect(token).toBeDefined();
    const own = `console-secret-${unique("v")}`;
    const posted = await worker(action, {
      method: "POST",
      headers: { cookie, "content-type": "application/x-www-form-urlencoded", origin: "http://antiproton.test" },
      body: new URLSearchParams({ _token: token!, name: "INBOX_TOKEN", value: own }).toString(),
      redirect: "manual",
    });
    expect(posted.status).toBe(303);
    const after = await consolePage(tenant);
    expect(after).toContain("INBOX_TOKEN");
    expect(after).not.toContain(own);
    const write = await newKey(tenant, { name: "w" });
    expect((await call(write, "PUT", `/tenants/${tenant}/agents/helper/mounts`, [poster("INBOX_TOKEN")])).status).toBe(200);
    const marker = unique("m");
    await send(write, tenant, "helper", await postingTurn(marker));
    await waitForInbox(marker);
    expect((await inbox(marker)).map((r) => r.authorization)).toEqual([`Bearer ${own}`]);
  });
});

describe("a platform grant", () => {
  it("lets the granted tenant's own mount use GITHUB_TOKEN from the environment; another tenant cannot", async () => {
    const granted = await newKey("granted-tenant", { name: "w" });
    expect((await call(granted, "PUT", "/tenants/granted-tenant/agents/helper/mounts", [poster("GITHUB_TOKEN")])).status).toBe(200);
    const marker = unique("m");
    await send(granted, "granted-tenant", "helper", await postingTurn(marker));
    await waitForInbox(marker);
    expect((await inbox(marker)).map((r) => r.authorization)).toEqual([`Bearer ${E.GITHUB_TOKEN}`]);
    const other = unique("beta");
    const key = await newKey(other, { name: "w" });
    expect((await call(key, "PUT", `/tenants/${other}/agents/helper/mounts`, [poster("GITHUB_TOKEN")])).status).toBe(400);
  });
});

describe("credentials at the door", () => {
  it("failed bearer tokens from one client are answered 429 with Retry-After after a handful; the right token still works from elsewhere", async () => {
    const client = { "cf-connecting-ip": `198.51.100.${Math.floor(Math.random() * 250)}` };
    for (let i = 0; i < 5; i++) expect((await call("Bearer wrong-token", "GET", "/secret-refs", undefined, client)).status).toBe(401);
    const throttled = await call("Bearer wrong-token", "GET", "/secret-refs", undefined, client);
    expect(throttled.status).toBe(429);
    expect(Number(throttled.headers.get("retry-after"))).toBeGreaterThan(0);
    // The client waits, whatever it sends; another client (the rightful holder) is not touched.
    expect((await call(ADMIN, "GET", "/secret-refs", undefined, client)).status).toBe(429);
    expect((await call(ADMIN, "GET", "/secret-refs", undefined, { "cf-connecting-ip": "192.0.2.77" })).status).toBe(200);
  });

  it("the bearer scheme in any case; a read-only key on an admin route is told it needs an admin key", async () => {
    expect((await call("bearer test-admin-token", "GET", "/secret-refs")).status).toBe(200);
    expect((await call("BEARER test-admin-token", "GET", "/secret-refs")).status).toBe(200);
    const tenant = unique("alpha");
    const reader = await newKey(tenant, { name: "r", access: "read" });
    const res = await call(reader, "GET", `/tenants/${tenant}/keys`);
    expect(res.status).toBe(403);
    expect(((await res.json()) as { error: string }).error).toMatch(/needs a tenant admin key/);
  });
});

/** What a follow of a conversation streams (from its start: an empty Last-Event-ID) until it has said `done`. */
async function followed(auth: string, path: string): Promise<string> {
  const res = await call(auth, "GET", path, undefined, { "last-event-id": "" });
  expect(res.status).toBe(200);
  const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
  let text = "";
  while (!text.includes("event: done")) {
    const { value, done } = await reader.read();
    if (done) break;
    text += value;
  }
  await reader.cancel();
  return text;
}

async function waitForInbox(marker: string): Promise<void> {
  for (let i = 0; i < 150; i++) {
    if ((await inbox(marker)).length > 0) return;
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** Every row of an object's SQLite, as text. */
function tableRows(stub: DurableObjectStub): Promise<string> {
  return runInDurableObject(stub, (_instance, state) => {
    const names = state.storage.sql.exec<{ name: string }>("SELECT name FROM sqlite_master WHERE type = 'table'").toArray().map((r) => r.name);
    return JSON.stringify(names.map((name) => state.storage.sql.exec(`SELECT * FROM "${name}"`).toArray()));
  });
}

/** Every row of the tenant's own object. */
function tenantTables(tenant: string): Promise<string> {
  return tableRows(tenantStub(env, tenant));
}

async function consolePage(tenant: string): Promise<string> {
  return (await worker(`/console/tenants/${tenant}`, { headers: { cookie: await consoleCookie() } })).text();
}

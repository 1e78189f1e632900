// The Agents API, whole and described (issue 28): the OpenAPI document of /v1
// validates and names every route; a request generated from each route's own
// schemas is answered as the document says; agents are created, listed, read,
// changed and deleted (a deletion mid-turn stops the turn, tells the chat and
// refuses what comes after); conversations are listed newest first in pages,
// cancelled and deleted; holds are listed and decided as an approver.
import SwaggerParser from "@apidevtools/swagger-parser";
import Ajv2020 from "ajv/dist/2020.js";
import { sample } from "openapi-sampler";
import { describe, expect, it } from "vitest";
import { apiDocument, deployed, v1Api } from "../../../worker.ts";
import { runInDurableObject } from "cloudflare:test";
import { agent as stub, alarmOf, rows } from "../../agents.ts";
import { consoleCookie, getConversation, postMessage, releaseProvider, script, settled, unique, waitFor, worker } from "../../support.ts";
import { hook, message, send, tenantWithCallback } from "../../bridges/webhook/helpers.ts";

const ADMIN = { authorization: "Bearer test-admin-token" };
const JSON_BODY = { ...ADMIN, "content-type": "application/json" };

type Schema = Record<string, unknown>;
type Operation = {
  parameters: { name: string; in: "path" | "query"; required: boolean; schema: Schema }[];
  requestBody?: { content: { "application/json": { schema: Schema } } };
  responses: Record<string, { content?: Record<string, { schema: Schema }> }>;
};

const ajv = new Ajv2020({ strict: false, allErrors: true, validateFormats: false });

function call(method: string, path: string, body?: unknown): Promise<Response> {
  return worker(`/v1${path}`, { method, headers: body === undefined ? ADMIN : JSON_BODY, body: body === undefined ? undefined : JSON.stringify(body) });
}

async function json<T = Record<string, unknown>>(res: Response, status: number): Promise<T> {
  const text = await res.text();
  expect(res.status, text).toBe(status);
  return (text ? JSON.parse(text) : null) as T;
}

describe("the OpenAPI document", () => {
  it("is served at /v1/openapi.json without a token and validates as OpenAPI 3.1", async () => {
    const res = await worker("/v1/openapi.json");
    expect(res.status).toBe(200);
    const served = await res.json();
    expect(served).toEqual(JSON.parse(JSON.stringify(apiDocument())));
    // The validator dereferences in place: it gets its own copy.
    const checked = (await SwaggerParser.validate(structuredClone(served) as never)) as { openapi?: string };
    expect(checked.openapi).toBe("3.1.0");
  });

  it("describes every route /v1 serves, and serves every route it describes", () => {
    const served = new Set(
      v1Api(deployed)
        .routes.filter((r) => r.method !== "ALL")
        .map((r) => `${r.method.toLowerCase()} ${r.path.replace(/:(\w+)/g, "{$1}")}`),
    );
    const described = new Set(Object.entries(apiDocument().paths).flatMap(([path, item]) => Object.keys(item).map((method) => `${method} ${path}`)));
    expect([...served].sort()).toEqual([...described].sort());
    expect(described.size).toBeGreaterThan(35);
  });

  it("answers a request generated from each route's schemas as the document describes", async () => {
    const tenant = unique("doc");
    const fixture: Record<string, string> = { tenant, agent: "helper", id: "c1" };
    // The agent and its conversation c1 exist, settled, so reads and deletes have something to find.
    await json(await call("POST", `/tenants/${tenant}/agents`, { agent: "helper" }), 201);
    await json(await postMessage(tenant, "helper", { text: "hello", conversation: "c1" }), 202);
    await settled(tenant, "helper", "c1");

    const order = ["post", "put", "patch", "get", "delete"];
    const operations = Object.entries(apiDocument().paths)
      .flatMap(([path, item]) => Object.entries(item).map(([method, op]) => ({ path, method, op: op as Operation })))
      // Deletes last, the agent's own the very last: what the others read is still there.
      .sort((a, b) => order.indexOf(a.method) - order.indexOf(b.method) || Number(a.path === "/tenants/{tenant}/agents/{agent}") - Number(b.path === "/tenants/{tenant}/agents/{agent}"));
    const answered: string[] = [];
    for (const { path, method, op } of operations) {
      const where = `${method.toUpperCase()} ${path}`;
      let url = path;
      const query = new URLSearchParams();
      for (const p of op.parameters) {
        // A response's id is the one the Responses API answered above (posts run first).
        const known = path.startsWith("/responses/") && p.name === "id" ? fixture.response : fixture[p.name];
        const value = p.in === "path" ? (known ?? String(sample(p.schema as never))) : p.required ? String(sample(p.schema as never)) : undefined;
        if (value === undefined) continue;
        expect(ajv.validate(p.schema, value), `${where}: generated ${p.name}=${value}`).toBe(true);
        if (p.in === "path") url = url.replace(`{${p.name}}`, encodeURIComponent(value));
        else query.set(p.name, value);
      }
      const bodySchema = op.requestBody?.content["application/json"].schema;
      const body = bodySchema ? sample(bodySchema as never) : undefined;
      if (bodySchema) expect(ajv.validate(bodySchema, body), `${where}: generated body ${JSON.stringify(body)} ${ajv.errorsText()}`).toBe(true);
      // The agent's own settings for this test's agent; "agent" in a created body is the fixture's second agent.
      const sent = method === "post" && path === "/tenants/{tenant}/agents" ? { ...(body as object), agent: "second" } : body;
      const res = await call(method.toUpperCase(), `${url}${query.size ? `?${query}` : ""}`, sent);
      const described = op.responses[String(res.status)];
      // A stream (the follow) answers for as long as it is read: its head is the answer.
      const streamed = res.headers.get("content-type")?.startsWith("text/event-stream");
      const text = streamed ? "" : await res.text();
      if (streamed) await res.body?.cancel();
      if (path === "/responses" && res.ok) fixture.response = (JSON.parse(text) as { id: string }).id;
      if (path === "/tenants/{tenant}/keys" && method === "post" && res.ok) fixture.keyId = (JSON.parse(text) as { id: string }).id;
      expect(described, `${where} answered ${res.status}, which the document does not describe: ${text}`).toBeDefined();
      const schema = !streamed && described!.content && Object.values(described!.content)[0]!.schema;
      if (schema) expect(ajv.validate(schema, JSON.parse(text)), `${where} ${res.status}: ${text}\n${ajv.errorsText()}`).toBe(true);
      if (res.status < 300) answered.push(where);
    }
    // Only deciding a hold finds none to decide, retiring a previous webhook secret finds none (the tenant's first
    // rotation had none before it), and the object-call counts are not kept (COUNT_OBJECT_CALLS is off: object-calls.test.ts
    // reads them on): 404s the document names. Every other route did its work.
    expect(operations.map(({ path, method }) => `${method.toUpperCase()} ${path}`).filter((where) => !answered.includes(where))).toEqual([
      "POST /tenants/{tenant}/agents/{agent}/holds/{holdId}",
      "GET /object-calls",
      "DELETE /webhook/tenants/{tenant}/secret/previous",
    ]);
  });
});

describe("the console's reference page", () => {
  it("draws every route of the document behind the console's sign-in, with no script", async () => {
    expect((await worker("/console/reference", { redirect: "manual" })).status).toBe(303);
    const res = await worker("/console/reference", { headers: { cookie: await consoleCookie() } });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-security-policy")).toMatch(/script-src 'nonce-/);
    const html = await res.text();
    for (const [path, item] of Object.entries(apiDocument().paths)) {
      for (const method of Object.keys(item)) expect(html).toContain(`${method.toUpperCase()} /v1${path}`);
    }
    expect(html).not.toMatch(/<script[^>]+src=/);
  });
});

describe("one rule for bad input: 400 naming the field", () => {
  it.each([
    ["POST", "/tenants/t1/agents/a1/messages", { kind: "steer" }, /text/],
    ["PUT", "/tenants/t1/agents/a1/mounts", [{ alias: "Bad Alias", plugin: "memory" }], /alias/],
    ["PUT", "/tenants/t1/agents/a1/mounts", [{ alias: "ok", plugin: "nope" }], /nope/],
    ["PUT", "/tenants/t1/model", { model: "" }, /model/],
    ["PUT", "/tenants/t1/agents/a1/second-message", { strategy: "shout" }, /strategy/],
    ["PUT", "/tenants/t1/limits", { dailyUsd: -1 }, /dailyUsd/],
    ["PUT", "/webhook/tenants/t1", { callback_url: "ftp://x" }, /callback_url/],
    ["POST", "/tenants/t1/agents", { agent: "a b" }, /agent/],
    ["PATCH", "/tenants/t1/agents/a1", {}, /at least one/],
  ])("%s %s", async (method, path, body, field) => {
    const res = await call(method, path, body);
    const { error } = await json<{ error: string }>(res, 400);
    expect(error).toMatch(field);
  });
});

describe("agents as resources", () => {
  it("are created with their settings, listed, read, changed, and not created twice", async () => {
    const tenant = unique("crud");
    const made = await json(await call("POST", `/tenants/${tenant}/agents`, { agent: "bob", description: "Bob helps.", model: { model: "local" }, secondMessage: "queue" }), 201);
    expect(made).toMatchObject({ agent: "bob", description: "Bob helps.", platform: "api", model: { own: { model: "local" } }, secondMessage: { effective: "queue", own: "queue" } });
    expect((await json<{ error: string }>(await call("POST", `/tenants/${tenant}/agents`, { agent: "bob" }), 409)).error).toMatch(/already exists/);
    // The agent's object took the strategy with its settings: a second message while it works is queued.
    expect(await rows(tenant, "bob", "SELECT value FROM meta WHERE key = 'settings'")).toEqual([{ value: expect.stringContaining('"agent":"queue"') }]);

    const changed = await json(await call("PATCH", `/tenants/${tenant}/agents/bob`, { description: null, policy: { memory: { write: "approval" } }, secondMessage: null }), 200);
    expect(changed).toMatchObject({ description: null, secondMessage: { effective: "steer", own: null } });
    expect((changed.mounts as { own: { alias: string; policy: unknown }[] }).own).toEqual([expect.objectContaining({ alias: "memory", plugin: "memory", policy: { write: "approval" } })]);
    expect((await json<{ error: string }>(await call("PATCH", `/tenants/${tenant}/agents/bob`, { policy: { nothere: {} } }), 400)).error).toMatch(/nothere/);

    await json(await postMessage(tenant, "carol", { text: "hi", conversation: "x" }), 202);
    const { agents } = await json<{ agents: { agent: string; platform: string }[] }>(await call("GET", `/tenants/${tenant}/agents`), 200);
    expect(agents.map((a) => [a.agent, a.platform])).toEqual([
      ["bob", "api"],
      ["carol", "api"],
    ]);
    expect((await json<{ error: string }>(await call("GET", `/tenants/${tenant}/agents/nobody`), 404)).error).toMatch(/no agent "nobody"/);
  });
});

/** The tenant's conversation ids, following `next` two at a time (at most 10 pages: a cursor that repeats itself fails, not hangs). */
async function tenantList(tenant: string): Promise<string[]> {
  const seen: string[] = [];
  let after: string | undefined;
  for (let pages = 0; pages < 10; pages++) {
    const page = await json<{ conversations: { id: string }[]; next?: string }>(await call("GET", `/tenants/${tenant}/conversations?limit=2${after ? `&after=${encodeURIComponent(after)}` : ""}`), 200);
    seen.push(...page.conversations.map((c) => c.id));
    after = page.next;
    if (!after) break;
  }
  return seen;
}

describe("conversations", () => {
  it("are listed newest first, a page at a time, per agent and across a tenant's agents", async () => {
    const tenant = unique("pages");
    const made: string[] = [];
    for (const [agent, id] of [
      ["a1", "c-1"],
      ["a2", "c-2"],
      ["a1", "c-3"],
      ["a2", "c-4"],
      ["a1", "c-5"],
    ] as const) {
      await json(await postMessage(tenant, agent, { text: `hello ${id}`, conversation: id }), 202);
      await settled(tenant, agent, id);
      made.push(id);
    }
    expect(await tenantList(tenant)).toEqual([...made].reverse());
    const first = await json<{ conversations: { id: string }[]; next: string }>(await call("GET", `/tenants/${tenant}/agents/a1/conversations?limit=2`), 200);
    expect(first.conversations.map((c) => c.id)).toEqual(["c-5", "c-3"]);
    const rest = await json<{ conversations: { id: string }[]; next?: string }>(await call("GET", `/tenants/${tenant}/agents/a1/conversations?limit=2&after=${encodeURIComponent(first.next)}`), 200);
    expect(rest).toEqual({ conversations: [expect.objectContaining({ id: "c-1" })] });
    // Conversations of different agents changed at the same instant: ties go by agent, then id, and no page repeats or skips one.
    for (const agent of ["a1", "a2"]) await rows(tenant, agent, "UPDATE conversations SET updated_at = 1000");
    expect(await tenantList(tenant)).toEqual(["c-4", "c-2", "c-5", "c-3", "c-1"]);
  });

  it("a running turn is cancelled; a running conversation is not deleted, a settled one is, for good", async () => {
    const tenant = unique("cancel");
    const s = unique("run");
    await script(s, [{ hold: true, text: "never shown" }]);
    await json(await postMessage(tenant, "a1", { text: `[s:${s}] think long`, conversation: s }), 202);
    await waitFor("the model call", async () => (await getConversation(tenant, "a1", s)).status === "waiting_model");
    expect((await json<{ error: string }>(await call("DELETE", `/tenants/${tenant}/agents/a1/conversations/${s}`), 409)).error).toMatch(/cancel/);
    const cancelled = await json<{ notice: string }>(await call("POST", `/tenants/${tenant}/agents/a1/conversations/${s}/cancel`), 200);
    expect(cancelled.notice).toBe("Stopped the running turn.");
    await releaseProvider(s);
    expect((await settled(tenant, "a1", s)).transcript.map((e) => e.text)).not.toContain("never shown");
    await json(await call("DELETE", `/tenants/${tenant}/agents/a1/conversations/${s}`), 204);
    await json(await call("GET", `/tenants/${tenant}/agents/a1/conversations/${s}`), 404);
    expect(await rows(tenant, "a1", "SELECT conversation FROM log WHERE conversation = ?", s)).toEqual([]);
    // The cancel's audit row, on its way to the trail when the conversation was deleted, outlives it.
    const trail = async () => (await json<{ entries: { actor: string; action: string; subject: string }[] }>(await call("GET", `/tenants/${tenant}/audit`), 200)).entries;
    const stop = await waitFor("the cancel's row", async () => (await trail()).find((e) => e.action === "conversation.stop"));
    expect(stop).toMatchObject({ actor: "platform:admin-token", subject: `agents/a1/conversations/${s}` });
  });
});

describe("holds through the API", () => {
  it("are listed for an approver and decided as that approver; a stranger is refused", async () => {
    const tenant = "approvals"; // APPROVERS lists U_APPROVER for it (test/fakes)
    const agent = unique("clerk");
    const s = unique("held");
    await script(s, [{ toolCalls: [{ name: "vault__append", arguments: { entry: s } }] }, { text: "waiting" }, { text: "recorded" }]);
    await json(await postMessage(tenant, agent, { text: `[s:${s}] record it`, conversation: s }), 202);
    await settled(tenant, agent, s);
    const { holds } = await json<{ holds: { conversation: string; card: { holdId: string } }[] }>(await call("GET", `/tenants/${tenant}/agents/${agent}/holds?approver=slack:U_APPROVER`), 200);
    expect(holds).toEqual([expect.objectContaining({ conversation: s, card: expect.objectContaining({ state: "pending", tool: "vault__append" }) })]);
    const holdId = holds[0]!.card.holdId;
    expect(await json(await call("GET", `/tenants/${tenant}/agents/${agent}/holds?approver=slack:U_STRANGER`), 200)).toEqual({ holds: [] });
    const refused = await call("POST", `/tenants/${tenant}/agents/${agent}/holds/${holdId}`, { approve: true, approver: { platform: "slack", id: "U_STRANGER" } });
    expect((await json<{ error: string }>(refused, 403)).error).toMatch(/may not decide/);
    const decided = await json(await call("POST", `/tenants/${tenant}/agents/${agent}/holds/${holdId}`, { approve: true, approver: { platform: "slack", id: "U_APPROVER", name: "Ada" } }), 200);
    expect(decided).toMatchObject({ decided: true, card: { state: "approved" } });
    await waitFor("the held call performed", async () => (await getConversation(tenant, agent, s)).holds[0]!.state === "performed");
    // One row, by the caller, naming the approver it decided for (the agent writes it with the decision).
    type Entry = { actor: string; action: string; subject: string; after: { approver?: string } };
    const trail = async () => (await json<{ entries: Entry[] }>(await call("GET", `/tenants/${tenant}/audit?limit=500`), 200)).entries.filter((e) => e.subject.includes(holdId));
    const rows = await waitFor("the decision's row", async () => ((await trail()).length > 0 ? trail() : undefined));
    expect(rows).toEqual([expect.objectContaining({ actor: "platform:admin-token", action: "hold.approve", after: expect.objectContaining({ approver: "slack:approvals:U_APPROVER" }) })]);
  });
});

describe("deleting an agent", () => {
  it("mid-turn stops it, tells its chat, and refuses a message afterwards", async () => {
    const tenant = await tenantWithCallback();
    const agent = "doomed";
    const s = unique("turn");
    await script(s, [{ hold: true, text: "an answer nobody should see" }]);
    expect((await send(tenant, { ...message(s, `[s:${s}] work on this`), agent })).status).toBe(202);
    await waitFor("the model call", async () => (await getConversation(tenant, agent, s)).status === "waiting_model");

    const deleted = await json(await call("DELETE", `/tenants/${tenant}/agents/${agent}`), 200);
    expect(deleted).toMatchObject({ deleted: true, stoppedTurns: 1, chatsTold: 1 });
    await releaseProvider(s);
    const told = await waitFor("the farewell at the callback", async () => {
      const { deliveries } = await hook(tenant);
      return deliveries.some((d) => d.body.type === "notice" && /agent was deleted/.test(d.body.text)) ? deliveries : undefined;
    });
    expect(told.map((d) => d.body.text)).not.toContain("an answer nobody should see");
    expect(await rows(tenant, agent, "SELECT status FROM conversations WHERE id = ?", s)).toEqual([{ status: "idle" }]);
    expect(await rows(tenant, agent, "SELECT status FROM model_jobs WHERE conversation = ? AND status = 'pending'", s)).toEqual([]);
    // Its farewell sent, the deleted agent keeps nothing armed: no step is due, ever.
    await waitFor("the deleted agent to go quiet", async () => (await alarmOf(tenant, agent)) === null);

    // Afterwards: a message is refused naming why, reads answer 404, and the agent is listed nowhere.
    const refused = await json<{ error: string }>(await postMessage(tenant, agent, { text: "are you there?", conversation: s }), 404);
    expect(refused.error).toMatch(/was deleted .* takes no messages/);
    expect((await send(tenant, { ...message(s, "hello?"), agent })).status).toBe(404);
    await json(await call("GET", `/tenants/${tenant}/agents/${agent}`), 404);
    await json(await call("GET", `/tenants/${tenant}/agents/${agent}/conversations/${s}`), 404);
    await json(await call("DELETE", `/tenants/${tenant}/agents/${agent}`), 404);
    expect(await json(await call("GET", `/tenants/${tenant}/agents`), 200)).toEqual({ agents: [] });
    expect((await json<{ error: string }>(await call("POST", `/tenants/${tenant}/agents`, { agent }), 409)).error).toMatch(/not reused/);
  });

  it("settles a hold still waiting, unperformed, without starting a turn to tell the agent", async () => {
    const tenant = "approvals";
    const agent = unique("gone");
    const s = unique("held");
    await script(s, [{ toolCalls: [{ name: "vault__append", arguments: { entry: s } }] }, { text: "waiting" }, { text: "must not run" }]);
    await json(await postMessage(tenant, agent, { text: `[s:${s}] record it`, conversation: s }), 202);
    await settled(tenant, agent, s);
    expect(await json(await call("DELETE", `/tenants/${tenant}/agents/${agent}`), 200)).toMatchObject({ stoppedTurns: 0, holdsSettled: 1 });
    expect(await rows(tenant, agent, "SELECT status, outcome FROM holds WHERE conversation = ?", s)).toEqual([{ status: "expired", outcome: "Not performed: the agent was deleted." }]);
    await waitFor("the deleted agent to go quiet", async () => (await alarmOf(tenant, agent)) === null);
    expect(await rows(tenant, agent, "SELECT status, turn FROM conversations WHERE id = ?", s)).toEqual([{ status: "idle", turn: 1 }]);

    // A stray mark on a running conversation (as a late report could leave) moves nothing: a deleted agent's pass writes no step.
    const logRows = () => rows(tenant, agent, "SELECT COUNT(*) AS n FROM log WHERE conversation = ?", s);
    const before = await logRows();
    await rows(tenant, agent, "UPDATE conversations SET status = 'running', pass_due = 1 WHERE id = ?", s);
    await runInDurableObject(stub(tenant, agent), (_instance, state) => state.storage.setAlarm(Date.now()));
    await waitFor("the pass the alarm runs", async () => (await alarmOf(tenant, agent)) === null);
    expect(await rows(tenant, agent, "SELECT status, pass_due FROM conversations WHERE id = ?", s)).toEqual([{ status: "running", pass_due: 0 }]);
    expect(await logRows()).toEqual(before);
  });
});

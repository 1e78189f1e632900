// The gateway: secrets by reference and redacted (invariant 5), plugin default
// policies, policy warnings, and the http plugin's limits.
import { env } from "cloudflare:workers";
import { runInDurableObject } from "cloudflare:test";
import { afterEach, describe, expect, it, vi } from "vitest";
import type { EffectMessage } from "../../runtime/effects/index.ts";
import { agent, couriersThrough, storedText } from "../agents.ts";
import { captureConsole, NO_LEAKS, secretLeaks } from "../leaks.ts";
import { Redactor } from "../../plugins/redact.ts";
import { getConversation, postMessage, providerRequests, script, settled, unique, worker } from "../support.ts";
import { AGENT, messageEnvelope, newTs, postEvent, slackId, statusFinal, threadMessages } from "../bridges/slack/helpers.ts";

const testEnv = env as unknown as Record<string, string>;
const CANARY = testEnv.REMOTE_API_TOKEN!;
const ADMIN = { authorization: "Bearer test-admin-token", "content-type": "application/json" };

/**
 * The canary in every form the careless remote echoes it (read from the remote
 * itself, so the test does not share the redactor's list): the middle half of
 * each echoed value, which lies inside the encoded secret, raw and JSON-escaped.
 */
async function echoedForms(): Promise<string[]> {
  const res = await fetch(`${testEnv.FAKE_REMOTE_URL}/echo`, { headers: { authorization: `Bearer ${CANARY}` } });
  const values = Object.values((await res.json()) as Record<string, string>);
  const cores = values.map((v) => v.slice(Math.floor(v.length / 4), Math.ceil((v.length * 3) / 4)));
  return [...new Set([CANARY, ...cores].flatMap((f) => [f, JSON.stringify(f).slice(1, -1)]))];
}

let forms: string[] = [];
function leaks(text: string): string[] {
  return forms.filter((f) => text.includes(f));
}

afterEach(() => vi.restoreAllMocks());

describe("a secret used by the http plugin (canary)", () => {
  it("never appears in SQLite, queue messages, model requests, log lines or chat, even when the remote echoes it", async () => {
    forms = await echoedForms();
    expect(forms.length).toBeGreaterThan(16);
    const lines = captureConsole();
    const team = slackId("T");
    const channel = slackId("C");
    const ts = newTs();
    const s = unique("canary");
    await script(s, [
      {
        toolCalls: [
          { name: "api__get", arguments: { url: `${testEnv.FAKE_REMOTE_URL}/echo` } },
          { name: "api__get", arguments: { url: `${testEnv.FAKE_REMOTE_URL}/echo.txt` } },
          { name: "api__get", arguments: { url: `${testEnv.FAKE_REMOTE_URL}/page` } },
        ],
      },
      { echoToolResults: true },
    ]);
    // Effects are captured on their way out of the (real) object: to their couriers, and any that go on the queue.
    const queued: EffectMessage[] = [];
    await runInDurableObject(agent(team, AGENT), (instance) => {
      const sendBatch = (batch: MessageSendRequest<EffectMessage>[]) => (queued.push(...batch.map((m) => m.body)), env.EFFECT_QUEUE.sendBatch(batch));
      const couriers = couriersThrough((effects) => (queued.push(...effects), effects));
      Object.assign(instance, { env: Object.create(env, { EFFECT_QUEUE: { value: { sendBatch } }, COURIER: { value: couriers } }) });
    });

    await postEvent(messageEnvelope({ team, channel, ts, text: `[s:${s}] check the status page` }));
    await statusFinal(channel, "Done.");

    const [reply] = await threadMessages(channel);
    expect(reply!.body.markdown_text).toContain("Bearer [redacted]");
    expect(reply!.body.markdown_text).toContain("All systems go & fine."); // HTML reduced to text; markdown_text takes & as it is
    expect(reply!.body.markdown_text).not.toMatch(/<script|<p>/);
    const view = await getConversation(team, AGENT, `${team}:${channel}:${ts}`);
    expect(view.transcript.filter((e) => e.role === "tool").every((e) => e.text.includes("[redacted]"))).toBe(true);

    expect(await storedText(team, AGENT)).toContain("[redacted]"); // the dump is real: it holds the redacted results
    expect(await secretLeaks(forms, { tenant: team, agent: AGENT, scenario: s, channel, lines })).toEqual(NO_LEAKS);
    expect(queued.length).toBeGreaterThan(0);
    expect(leaks(JSON.stringify(queued))).toEqual([]);
  });
});

describe("redaction", () => {
  // The canary of the careless remote, so its characters include those every encoding changes.
  const redactor = new Redactor([CANARY]);
  const half = Math.floor(CANARY.length / 2);
  const decimal = (c: string) => `&#${c.codePointAt(0)};`;
  const hex = (c: string) => `&#x${c.codePointAt(0)!.toString(16)};`;

  it("finds a secret written as HTML character references: decimal, hex in either case, with leading zeros, named, or mixed with plain characters", () => {
    const forms = [
      [...CANARY].map(decimal).join(""),
      [...CANARY].map(hex).join(""),
      [...CANARY].map((c) => `&#X${c.codePointAt(0)!.toString(16).toUpperCase()};`).join(""),
      [...CANARY].map((c) => `&#000${c.codePointAt(0)};`).join(""),
      // Only some characters referenced, as an encoder that escapes punctuation does; &quot; and &apos; named.
      [...CANARY].map((c, i) => (c === '"' ? "&quot;" : c === "'" ? "&apos;" : i % 3 === 0 ? decimal(c) : i % 3 === 1 ? hex(c) : c)).join(""),
    ];
    for (const form of forms) expect(redactor.redact(`<p>token: ${form}</p>`), form).toBe("<p>token: [redacted]</p>");
  });

  it("finds a secret, and its encodings, split across lines: raw or JSON-escaped breaks, indented continuations, wrapped base64", () => {
    const split = [`${CANARY.slice(0, half)}\n${CANARY.slice(half)}`, `${CANARY.slice(0, half)}\r\n    ${CANARY.slice(half)}`, `${CANARY.slice(0, 5)}\\n${CANARY.slice(5)}`];
    for (const form of split) expect(redactor.redact(`key = ${form};`), JSON.stringify(form)).toBe("key = [redacted];");
    // A request's headers sent as MIME base64 (76 columns): the characters only the secret decides run over a line end.
    const dump = `GET /x HTTP/1.1\r\nHost: a.test\r\nAuthorization: Bearer ${CANARY}\r\n\r\n`;
    const joined = btoa(dump);
    const at = dump.indexOf(CANARY);
    const span = joined.slice(Math.ceil((at * 4) / 3), Math.floor(((at + CANARY.length) * 4) / 3));
    const mime = joined.replace(/.{76}(?=.)/g, "$&\r\n");
    expect(mime).not.toContain(span);
    const left = redactor.redact(mime).replaceAll("\r\n", "");
    expect(left).toContain("[redacted]");
    for (let i = 0; i + 8 <= span.length; i++) expect(left).not.toContain(span.slice(i, i + 8));
    const hexLines = [...new TextEncoder().encode(CANARY)].map((b) => b.toString(16).padStart(2, "0")).join("").replace(/.{32}(?=.)/g, "$&\n");
    expect(redactor.redact(hexLines)).toBe("[redacted]");
  });

  it("leaves ordinary text alone: a part of the secret, references to other characters, lines of other words", () => {
    const ordinary = [CANARY.slice(0, half), [..."canary"].map(decimal).join(""), `${CANARY.slice(0, half)}\n\nThe end.`, "line one\nline two &#38; three"];
    for (const text of ordinary) expect(redactor.redact(text)).toBe(text);
  });
});

describe("policies", () => {
  it("a plugin's defaultPolicy holds its tool on a mount with write: allow; the mount's own per-tool allow lifts it", async () => {
    const A = "poster";
    const orders = async () => ((await (await fetch(`${testEnv.FAKE_REMOTE_URL}/_control/orders`)).json()) as { body: string; authorized: boolean }[]);
    const marker = unique("order");
    const s1 = unique("dp");
    await script(s1, [{ toolCalls: [{ name: "hooks__post", arguments: { url: `${testEnv.FAKE_REMOTE_URL}/orders`, body: { marker } } }] }, { text: "held" }]);
    await postMessage("policies", A, { text: `[s:${s1}] order`, conversation: s1 });
    const held = await settled("policies", A, s1);
    expect(held.holds).toHaveLength(1);
    expect(held.transcript.find((e) => e.role === "tool")!.text).toMatch(/^Held for approval/);
    expect((await orders()).filter((o) => o.body.includes(marker))).toHaveLength(0);

    const lift = await worker(`/v1/tenants/policies/agents/${A}/mounts`, {
      method: "PUT",
      headers: ADMIN,
      body: JSON.stringify([
        { alias: "hooks", plugin: "http", config: { allowedHosts: [new URL(testEnv.FAKE_REMOTE_URL!).host] }, secret_ref: "REMOTE_API_TOKEN", policy: { write: "allow", tools: { post: "allow" } } },
      ]),
    });
    expect(lift.status).toBe(200);
    const mounts = (await (await worker(`/v1/tenants/policies/agents/${A}/mounts`, { headers: ADMIN })).json()) as { tools: { name: string; policy: string }[] };
    expect(mounts.tools.find((t) => t.name === "hooks__post")!.policy).toBe("allow");
    expect(mounts.tools.find((t) => t.name === "api__post")!.policy).toBe("approval");

    const s2 = unique("dp");
    await script(s2, [{ toolCalls: [{ name: "hooks__post", arguments: { url: `${testEnv.FAKE_REMOTE_URL}/orders`, body: { marker } } }] }, { text: "posted" }]);
    await postMessage("policies", A, { text: `[s:${s2}] order`, conversation: s2 });
    const done = await settled("policies", A, s2);
    expect(done.holds).toHaveLength(0);
    expect(done.transcript.find((e) => e.role === "tool")!.text).toMatch(/^HTTP 201/);
    const placed = (await orders()).filter((o) => o.body.includes(marker));
    expect(placed).toEqual([{ body: JSON.stringify({ marker }), authorized: true }]);
  });

  it("a denied tool is not offered to the model, never reaches the plugin when called by name, and the model is told it was refused", async () => {
    const A = "denied";
    const entry = unique("entry");
    await worker(`/v1/tenants/policies/agents/${A}/mounts`, {
      method: "PUT",
      headers: ADMIN,
      body: JSON.stringify([{ alias: "ledger", plugin: "ledger", config: { url: testEnv.FAKE_LEDGER_URL }, policy: { tools: { append: "deny" } } }]),
    });
    const s = unique("deny");
    await script(s, [{ toolCalls: [{ name: "ledger__append", arguments: { entry } }] }, { text: "refused" }]);
    await postMessage("policies", A, { text: `[s:${s}] go`, conversation: s });
    const view = await settled("policies", A, s);
    expect(view.transcript.find((e) => e.role === "tool")).toMatchObject({ isError: true, text: 'Refused: the policy of mount "ledger" does not allow ledger__append.' });
    const requests = await providerRequests(s);
    expect(requests).toHaveLength(2);
    for (const { body } of requests) {
      const offered = (body.tools as { function: { name: string } }[]).map((t) => t.function.name);
      expect(offered).toContain("ledger__read");
      expect(offered).not.toContain("ledger__append");
    }
    const appends = (await (await fetch(`${testEnv.FAKE_LEDGER_URL}/appends?entry=${entry}`)).json()) as unknown[];
    expect(appends).toHaveLength(0);
    // The operator still sees it, denied.
    const mounts = (await (await worker(`/v1/tenants/policies/agents/${A}/mounts`, { headers: ADMIN })).json()) as { tools: { name: string; policy: string }[] };
    expect(mounts.tools.find((t) => t.name === "ledger__append")?.policy).toBe("deny");
  });

  it("status warns when an ungated mount of a plugin sits beside a gated one", async () => {
    const s = unique("warn");
    await script(s, [{ text: "hi" }]);
    await postMessage("policies", "warned", { text: `[s:${s}] hi`, conversation: s });
    await settled("policies", "warned", s);
    const status = await agent("policies", "warned").submit(
      { tenant: "policies", agent: "warned" },
      { id: unique("st"), kind: "command", command: "status", conversation: s, user: { platform: "api", id: "admin" } },
    );
    expect(status.notice).toContain('Warning: mount "ledger" lets ledger.append run without a person, while mount "vault" of the same plugin gates it');
    // Both http mounts hold post (its plugin default), so they raise no warning.
    expect(status.notice).not.toContain("http.post");
  });

  it("bad mount overrides are refused with the reason", async () => {
    const res = await worker("/v1/tenants/policies/mounts", { method: "PUT", headers: ADMIN, body: JSON.stringify([{ alias: "x", plugin: "nope" }]) });
    expect(res.status).toBe(400);
    expect(await res.json()).toEqual({ error: 'bad body: MOUNTS: alias "x" names unknown plugin "nope"' });
    const bad = await worker("/v1/tenants/policies/mounts", { method: "PUT", headers: ADMIN, body: JSON.stringify([{ alias: "w", plugin: "http", config: {} }]) });
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { error: string }).error).toMatch(/allowedHosts/);
  });
});

describe("the http plugin's limits", () => {
  it("refuses hosts the mount does not allow, and says so to the model", async () => {
    const s = unique("host");
    await script(s, [{ toolCalls: [{ name: "api__get", arguments: { url: "https://example.com/x" } }, { name: "api__get", arguments: { url: "http://10.0.0.1/x" } }] }, { text: "ok" }]);
    await postMessage("policies", "limits", { text: `[s:${s}] go`, conversation: s });
    const view = await settled("policies", "limits", s);
    const results = view.transcript.filter((e) => e.role === "tool").map((e) => e.text);
    expect(results[0]).toMatch(/^Host example.com is not allowed for this mount/);
    expect(results[1]).toBe("Only https URLs are allowed (got http:).");
  });
});

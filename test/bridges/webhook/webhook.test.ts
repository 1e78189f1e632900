// The generic webhook bridge against the fake callback receiver on loopback.
import { env } from "cloudflare:workers";
import { createExecutionContext } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { decisionValue } from "../../../approvals/index.ts";
import { signatureHeaders } from "../../../bridges/shared/signed-request.ts";
import { putTenantRecord } from "../../../runtime/index.ts";
import { agentExists } from "../../agents.ts";
import { messageEnvelope, newTs, postEvent, threadMessages } from "../slack/helpers.ts";
import { chooseModels, getConversation, ledgerAppends, providerRequests, releaseProvider, script, sharedWithModel, PNG, unique, waitFor, worker } from "../../support.ts";
import { finished, hook, message, send, tenantWithCallback } from "./helpers.ts";
import handler from "../../worker-under-test.ts";

const E = env as unknown as Record<string, string>;
const ADMIN = { authorization: "Bearer test-admin-token" };
const AGENT = "assistant";

describe("webhook bridge", () => {
  it("a signed message → the reply at the callback once, signed, with working state", async () => {
    const tenant = await tenantWithCallback();
    const res = await send(tenant, message("c1", "hello"));
    expect(res.status).toBe(202);
    expect(await res.json()).toMatchObject({ accepted: true, conversation: "c1" });

    const deliveries = await finished(tenant);
    expect(deliveries.map((d) => [d.body.type, d.body.state ?? null, d.body.text])).toEqual([
      ["status", "working", "Working on it…"],
      ["reply", null, "ok: hello"],
      ["status", "done", "Done."],
    ]);
    expect(deliveries.every((d) => d.signatureValid && d.body.tenant === tenant && d.body.agent === AGENT && d.body.conversation === "c1")).toBe(true);
    // One status message, updated in place: the later status names the first one.
    const [working, , done] = deliveries;
    expect(done!.body.status_id).toBe(working!.body.status_id);
    expect(new Set(deliveries.map((d) => d.idempotencyKey)).size).toBe(3);
  });

  it("the same idempotency key twice → one turn", async () => {
    const tenant = await tenantWithCallback();
    const s = unique("dup");
    await script(s, [{ text: "only once" }]);
    const event = message("c2", `[s:${s}] do it`);
    expect((await send(tenant, event)).status).toBe(202);
    const again = await send(tenant, event);
    expect(again.status).toBe(200);
    expect(await again.json()).toMatchObject({ accepted: false });
    const deliveries = await finished(tenant);
    expect(deliveries.filter((d) => d.body.type === "reply").map((d) => d.body.text)).toEqual(["only once"]);
    expect(await providerRequests(s)).toHaveLength(1);
  });

  it("bad, stale or missing signature → 401; nothing written", async () => {
    const tenant = await tenantWithCallback();
    const event = { tenant, ...message("c3", "never") };
    const body = JSON.stringify(event);
    const wrongSecret = await signatureHeaders("not-the-secret", body);
    const stale = await signatureHeaders(E.WEBHOOK_SECRET!, body, Date.now() - 301_000);
    const otherBody = await signatureHeaders(E.WEBHOOK_SECRET!, JSON.stringify({ ...event, text: "other" }));
    for (const headers of [wrongSecret, stale, otherBody, {}]) expect((await send(tenant, event, headers)).status).toBe(401);
    await expect(getConversation(tenant, AGENT, "c3")).rejects.toThrow(/404/);
  });

  it("a signed event replayed to another tenant's URL → 403; nothing written there", async () => {
    const [a, b] = [await tenantWithCallback(), await tenantWithCallback()];
    const event = { tenant: a, ...message("c9", "meant for a") };
    const headers = await signatureHeaders(E.WEBHOOK_SECRET!, JSON.stringify(event));
    const replayed = await send(b, event, headers);
    expect(replayed.status).toBe(403);
    expect(await replayed.json()).toEqual({ error: `the signed event is for tenant "${a}", not "${b}"` });
    await expect(getConversation(b, AGENT, "c9")).rejects.toThrow(/404/);
  });

  it("malformed JSON → 400, an invalid event → 422, an unregistered tenant → 409; nothing written", async () => {
    const tenant = await tenantWithCallback();
    const raw = '{"type":"message",';
    const malformed = await worker(`/webhook/${tenant}/events`, {
      method: "POST",
      headers: { "content-type": "application/json", ...(await signatureHeaders(E.WEBHOOK_SECRET!, raw)) },
      body: raw,
    });
    expect(malformed.status).toBe(400);
    expect((await send(tenant, { ...message("c4", "x"), idempotency_key: undefined })).status).toBe(422);
    expect((await send(tenant, { ...message("c4", "x"), type: "shout" })).status).toBe(422);
    await expect(getConversation(tenant, AGENT, "c4")).rejects.toThrow(/404/);
    const stranger = unique("nobody");
    expect((await send(stranger, message("c4", "x"))).status).toBe(409);
    await expect(getConversation(stranger, AGENT, "c4")).rejects.toThrow(/404/);
  });

  it("ids that are not well-formed text (a lone surrogate) → 422 naming them; nothing written", async () => {
    const tenant = await tenantWithCallback();
    const badKey = await send(tenant, message("c10", "x", "key-\ud800"));
    expect(badKey.status).toBe(422);
    expect(((await badKey.json()) as { error: string }).error).toMatch(/lone surrogate.*at idempotency_key/s);
    const badUser = await send(tenant, { ...message("c10", "x"), user: { id: "u\udc00" } });
    expect(badUser.status).toBe(422);
    expect(await agentExists(tenant, AGENT)).toBe(false);
    expect((await hook(tenant)).attempts).toBe(0);
  });

  it("the callback failing twice then succeeding → delivered once", async () => {
    const tenant = await tenantWithCallback(2);
    await send(tenant, message("c5", "persist"));
    const deliveries = await finished(tenant);
    const { attempts } = await hook(tenant);
    expect(attempts).toBe(deliveries.length + 2);
    expect(deliveries.filter((d) => d.body.type === "reply").map((d) => d.body.text)).toEqual(["ok: persist"]);
    expect(new Set(deliveries.map((d) => d.idempotencyKey)).size).toBe(deliveries.length);
  });

  it("a retried callback carries the same Idempotency-Key as its first attempt", async () => {
    const tenant = await tenantWithCallback(1, 500);
    await send(tenant, message("c11", "retry me"));
    const deliveries = await finished(tenant);
    const { failures } = await hook(tenant);
    expect(failures).toHaveLength(1);
    const [first] = failures;
    // The retry is the delivery of the same message (the same body); the receiver dedupes on its key.
    const retry = deliveries.find((d) => JSON.stringify(d.body) === JSON.stringify(first!.body));
    expect(retry).toBeDefined();
    expect(retry!.idempotencyKey).toBe(first!.idempotencyKey);
    expect(deliveries.filter((d) => d.idempotencyKey === first!.idempotencyKey)).toHaveLength(1);
  });

  it("a callback whose answer is lost is sent again after the send timeout with the same Idempotency-Key", async () => {
    const tenant = await tenantWithCallback();
    // The receiver takes the reply and never answers.
    await fetch(`${E.FAKE_CALLBACK_URL}/_control/hold/${tenant}`, { method: "POST", body: JSON.stringify({ textIncludes: "ok: redeliver" }) });
    await send(tenant, message("c12", "redeliver"));
    const replies = (await finished(tenant)).filter((d) => d.body.type === "reply");
    expect(replies.map((d) => d.body.text)).toEqual(["ok: redeliver", "ok: redeliver"]);
    // One message for a receiver that dedupes on the key, as docs/webhook.md asks.
    expect(new Set(replies.map((d) => d.idempotencyKey)).size).toBe(1);
  });

  it("interrupt and commands: stop ends the running turn, status answers at once", async () => {
    const tenant = await tenantWithCallback();
    const s = unique("int");
    await script(s, [{ hold: true, text: "too late" }]);
    await send(tenant, message("c6", `[s:${s}] long`));
    await waitFor("the model to be asked", async () => (await providerRequests(s)).length === 1);
    const stop = await send(tenant, { type: "interrupt", idempotency_key: unique("k"), conversation: "c6", user: { id: "u1" } });
    expect(await stop.json()).toMatchObject({ accepted: true, status: "idle", notice: "Stopped the running turn." });
    await releaseProvider(s);
    // The notice follows the final status, in order.
    const deliveries = await waitFor("the notice after the final status", async () => {
      const all = await finished(tenant, "stopped");
      return all.some((d) => d.body.type === "notice") && all;
    });
    expect(deliveries.filter((d) => d.body.type !== "status").map((d) => [d.body.type, d.body.text])).toEqual([["notice", "The turn was stopped."]]);
    const status = await send(tenant, { type: "command", command: "status", idempotency_key: unique("k"), conversation: "c6", user: { id: "u1" } });
    expect(await status.json()).toMatchObject({ notice: expect.stringMatching(/^Status: idle/) });
  });

  it("a held call → a JSON action card at the callback; the chosen action's value decides it; the card is updated in place", async () => {
    const tenant = await tenantWithCallback();
    const s = unique("card");
    const entry = unique("entry");
    await script(s, [{ toolCalls: [{ name: "vault__append", arguments: { entry } }] }, { text: "Waiting for approval." }, { text: "Recorded." }]);
    await send(tenant, message("c7", `[s:${s}] record ${entry}`));
    const posted = await waitFor("the card", async () => (await hook(tenant)).deliveries.find((d) => d.body.type === "card"));
    expect(posted.signatureValid).toBe(true);
    const card = posted.body.card!;
    expect(card).toMatchObject({ state: "pending", title: "Approval needed: vault__append", decided_by: null });
    expect(card.actions.map((a) => [a.action, a.label])).toEqual([["approve", "Approve"], ["deny", "Deny"]]);

    const decide = (userId: string) =>
      send(tenant, { type: "decision", value: card.actions[0]!.value, idempotency_key: unique("k"), conversation: "c7", user: { id: userId, name: "Ada" } });
    expect(await (await decide("someone-else")).json()).toMatchObject({ notice: "You are not allowed to decide this approval. It is still waiting." });
    const res = await decide("u1"); // u1 started the conversation
    expect(res.status).toBe(202);
    expect(await res.json()).toMatchObject({ notice: "Approved. Performing it now.", card: { hold_id: card.hold_id, state: "approved", decided_by: "Ada", actions: [] } });

    const performed = await waitFor("the card updated to performed", async () =>
      (await hook(tenant)).deliveries.find((d) => d.body.type === "card" && d.body.card!.state === "performed"),
    );
    expect(performed.body.card_id).toBe(posted.body.card_id);
    expect(await ledgerAppends(entry)).toHaveLength(1);
  });

  it("a decision bound to another tenant is refused; a value that is not an action's → 422", async () => {
    const tenant = await tenantWithCallback();
    const base = { type: "decision", idempotency_key: unique("k"), conversation: "c8", user: { id: "u1" } };
    const refused = await send(tenant, { ...base, value: decisionValue("elsewhere", AGENT, "h1", true) });
    expect(await refused.json()).toMatchObject({ notice: "Refused: this button belongs to another workspace or agent." });
    expect((await send(tenant, { ...base, idempotency_key: unique("k"), value: "approve:h1" })).status).toBe(422);
  });

  it("callback registration is admin-only and takes only https or loopback URLs", async () => {
    const tenant = unique("reg");
    const put = (headers: Record<string, string>, callback_url: string) =>
      worker(`/v1/webhook/tenants/${tenant}`, { method: "PUT", headers: { "content-type": "application/json", ...headers }, body: JSON.stringify({ callback_url }) });
    expect((await put({}, "https://example.com/hook")).status).toBe(401);
    expect((await put(ADMIN, "http://example.com/hook")).status).toBe(400);
    expect((await put(ADMIN, "https://example.com/hook")).status).toBe(200);
    expect(await (await worker(`/v1/webhook/tenants/${tenant}`, { headers: ADMIN })).json()).toEqual({ tenant, callback_url: "https://example.com/hook" });
    expect((await worker(`/v1/webhook/tenants/${tenant}`, { method: "DELETE", headers: ADMIN })).status).toBe(204);
    expect((await worker(`/v1/webhook/tenants/${tenant}`, { headers: ADMIN })).status).toBe(404);
  });

  it("a callback_url that is not a URL at all → 400 saying so, and nothing is registered", async () => {
    const tenant = unique("reg");
    for (const callback_url of ["not a url", "", "%00", "http://", "\u0000"]) {
      const res = await worker(`/v1/webhook/tenants/${tenant}`, { method: "PUT", headers: { ...ADMIN, "content-type": "application/json" }, body: JSON.stringify({ callback_url }) });
      expect(res.status, JSON.stringify(callback_url)).toBe(400);
      expect(((await res.json()) as { error: string }).error).toMatch(/callback_url is not a URL/);
    }
    expect((await worker(`/v1/webhook/tenants/${tenant}`, { headers: ADMIN })).status).toBe(404);
  });
});

describe("tenants belong to the bridge that brought them", () => {
  it("a Slack workspace's tenant cannot take a webhook callback, and a webhook event cannot reach its threads", async () => {
    const team = `T${unique("").slice(0, 10).toUpperCase()}`;
    const s = unique("slack");
    await script(s, [{ text: "from Slack" }]);
    // The workspace's first event makes its agent Slack's.
    const channel = `C${unique("").slice(0, 10).toUpperCase()}`;
    const ts = newTs();
    expect((await postEvent(messageEnvelope({ team, channel, ts, text: `[s:${s}] hi` }))).status).toBe(200);
    await waitFor("the Slack reply", async () => (await threadMessages(channel)).length === 1);

    const register = await worker(`/v1/webhook/tenants/${team}`, {
      method: "PUT",
      headers: { ...ADMIN, "content-type": "application/json" },
      body: JSON.stringify({ callback_url: `${E.FAKE_CALLBACK_URL}/hooks/${team}` }),
    });
    expect(register.status).toBe(409);
    expect(await register.text()).toMatch(/belongs to the slack bridge/);

    // Even with a callback in place (registered before the check existed, say), the object refuses the event.
    await fetch(`${E.FAKE_CALLBACK_URL}/_control/hooks/${team}`, { method: "PUT", body: JSON.stringify({}) });
    await putTenantRecord(env, team, "webhook-callbacks", { callback_url: `${E.FAKE_CALLBACK_URL}/hooks/${team}` });
    const res = await send(team, message(`${team}:${channel}:${ts}`, "hijack"));
    expect(res.status).toBe(403);
    expect(await res.text()).toMatch(/belongs to the slack bridge; a webhook event cannot address it/);
    const view = await getConversation(team, AGENT, `${team}:${channel}:${ts}`);
    expect(view.transcript.filter((e) => e.role === "user")).toHaveLength(1);
    expect((await hook(team)).deliveries).toEqual([]);
  });
});

// ---- per-tenant secrets ------------------------------------------------------------
// Per-tenant webhook secrets (bridges/webhook/secrets.ts): an event signed with
// tenant A's secret is refused for tenant B; during a rotation the old and the
// new secret both verify, after retirement only the new one; the shared secret
// serves only tenants without their own, and can be switched off.

async function rotate(tenant: string, body: object = {}): Promise<{ secret: string; previous_retires_at: string | null }> {
  const res = await worker(`/v1/webhook/tenants/${tenant}/secret`, { method: "POST", headers: { ...ADMIN, "content-type": "application/json" }, body: JSON.stringify(body) });
  expect(res.status, await res.clone().text()).toBe(201);
  return res.json();
}

/** An event for `tenant` signed with `secret`, posted to the tenant named in the path. */
async function signedWith(secret: string, pathTenant: string, bodyTenant = pathTenant): Promise<Response> {
  const event = message("c1", "hello", unique("k"));
  const body = JSON.stringify({ tenant: bodyTenant, ...event });
  return send(pathTenant, { ...event, tenant: bodyTenant }, await signatureHeaders(secret, body));
}

describe("per-tenant webhook secrets", () => {
  it("A's secret does not sign for B, and a signed event naming another tenant is refused", async () => {
    const A = await tenantWithCallback();
    const B = await tenantWithCallback();
    const { secret: a } = await rotate(A);
    const { secret: b } = await rotate(B);
    expect(a).not.toBe(b);
    expect((await signedWith(a, B)).status).toBe(401);
    expect((await signedWith(a, A, B)).status).toBe(403);
    expect((await signedWith(b, B)).status).toBe(202);
    // A tenant with its own secret no longer takes the shared one.
    expect((await signedWith(E.WEBHOOK_SECRET!, A)).status).toBe(401);
  });

  it("during a rotation both secrets verify; after retirement only the new one; callbacks are signed with the current one", async () => {
    const A = await tenantWithCallback();
    const { secret: first } = await rotate(A);
    const { secret: second, previous_retires_at } = await rotate(A, { overlap_hours: 1 });
    expect(Date.parse(previous_retires_at!)).toBeGreaterThan(Date.now());
    expect((await signedWith(first, A)).status).toBe(202);
    expect((await signedWith(second, A)).status).toBe(202);

    const retired = await worker(`/v1/webhook/tenants/${A}/secret/previous`, { method: "DELETE", headers: ADMIN });
    expect(retired.status).toBe(200);
    expect((await signedWith(first, A)).status).toBe(401);
    expect((await signedWith(second, A)).status).toBe(202);

    // An overlap of zero retires the previous secret at once.
    const { secret: third, previous_retires_at: none } = await rotate(A, { overlap_hours: 0 });
    expect(none).toBeNull();
    expect((await signedWith(second, A)).status).toBe(401);
    expect((await signedWith(third, A)).status).toBe(202);


    // Rotations and the retirement are in the trail, without a secret.
    const audit = (await (await worker(`/v1/tenants/${A}/audit`, { headers: ADMIN })).json()) as { entries: { action: string; actor: string }[] };
    expect(audit.entries.map((e) => e.action).filter((a) => a.startsWith("webhook-secret")).reverse()).toEqual(["webhook-secret.rotate", "webhook-secret.rotate", "webhook-secret.retire", "webhook-secret.rotate"]);
    expect(JSON.stringify(audit)).not.toContain(first);
    expect(JSON.stringify(audit)).not.toContain(second);
  });

  it("our callbacks to a tenant are signed with its current secret", async () => {
    const A = await tenantWithCallback();
    const { secret } = await rotate(A);
    await fetch(`${E.FAKE_CALLBACK_URL}/_control/hooks/${A}`, { method: "PUT", body: JSON.stringify({ secret }) });
    expect((await signedWith(secret, A)).status).toBe(202);
    const deliveries = await finished(A);
    expect(deliveries.map((d) => [d.body.type, d.signatureValid])).toEqual([
      ["status", true],
      ["reply", true],
      ["status", true],
    ]);
  });

  it("the shared secret is only a default, and switched off it signs nothing", async () => {
    const A = await tenantWithCallback();
    const event = message("c1", "hello", unique("k"));
    const body = JSON.stringify({ tenant: A, ...event });
    const post = async (vars: Record<string, string>) =>
      handler.fetch!(
        new Request(`http://antiproton.test/webhook/${A}/events`, { method: "POST", headers: { "content-type": "application/json", ...(await signatureHeaders(E.WEBHOOK_SECRET!, body)) }, body }) as Request<unknown, IncomingRequestCfProperties>,
        ({ ...env, ...vars }) as Env,
        createExecutionContext(),
      );
    const off = await post({ WEBHOOK_SHARED_SECRET_ENABLED: "false" });
    expect(off.status).toBe(401);
    expect(await off.json()).toMatchObject({ error: expect.stringContaining("switched off") });
    const on = await post({});
    expect(on.status, await on.clone().text()).toBe(202);
  });
});


/** A file the peer links to: served on loopback (the fake Discord's CDN serves any file, with no token). */
async function served(name: string, type: string, base64: string) {
  const path = `${unique("f")}/${name}`;
  await fetch(`${E.FAKE_DISCORD_URL}/_control/attachments/${path}`, { method: "PUT", body: JSON.stringify({ base64, contentType: type }) });
  return { name, type, size: Buffer.from(base64, "base64").length, url: `${E.FAKE_DISCORD_URL}/attachments/${path}` };
}

describe("files with a webhook message", () => {
  it("are fetched from their URLs: a picture reaches a model that takes images as image input, a text file as text, another kind is named", async () => {
    const tenant = await tenantWithCallback();
    await chooseModels({ [tenant]: "fake-anthropic/claude-sonnet-4-5" });
    const s = unique("wh-files");
    await script(s, [{ text: "A dot, and the answer." }]);
    const files = [await served("dot.png", "image/png", PNG), await served("notes.txt", "text/plain", Buffer.from("the answer is 42").toString("base64")), await served("data.bin", "application/octet-stream", "AAAA")];
    expect((await send(tenant, { ...message("files", `[s:${s}] look`), files })).status).toBe(202);
    await finished(tenant);
    const { parts, text } = await sharedWithModel(s);
    expect(parts).toContainEqual(expect.objectContaining({ type: "image", source: { type: "base64", media_type: "image/png", data: PNG } }));
    expect(text).toContain("the answer is 42");
    expect(text).toContain("[file data.bin (application/octet-stream, 3 bytes), not shown: a kind of file the agent cannot read]");
  });

  it("a file's URL that is neither https nor loopback, or a type that is not a media type, is a 422 naming it; nothing is written", async () => {
    const tenant = await tenantWithCallback();
    const plain = await send(tenant, { ...message("files-bad", "look"), files: [{ name: "a.png", type: "image/png", size: 1, url: "http://example.com/a.png" }] });
    expect(plain.status).toBe(422);
    expect(await plain.text()).toContain("files[].url must be https");
    const untyped = await send(tenant, { ...message("files-bad", "look"), files: [{ name: "a.png", type: "png", size: 1, url: "https://example.com/a.png" }] });
    expect(untyped.status).toBe(422);
    expect(await untyped.text()).toContain("type is a media type");
    expect(await agentExists(tenant, AGENT)).toBe(false);
  });
});

// Invariant 7 at the object: a held call is performed at most once, only after
// a person allowed to decide signs it, under the policy as it is then; a hold
// past its TTL is never performed; the agent is told either way.
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import type { ChatEvent } from "../../runtime/index.ts";
import { agent, alarmOf, rows } from "../agents.ts";
import { answered, getConversation, ledgerAppends, postMessage, providerRequests, script, settled, unique, waitFor, withVars, worker } from "../support.ts";

const T = "approvals";
const A = "clerk";
const route = { tenant: T, agent: A };
const APPROVER = { platform: "slack" as const, id: "U_APPROVER", name: "Ada" };

function click(holdId: string, approve: boolean, user: ChatEvent["user"] = APPROVER, boundTo = route): ChatEvent {
  return { id: unique("click"), kind: "decision", conversation: "ignored-by-decisions", holdId, approve, boundTo, user };
}

/** A turn whose model asks for the gated vault__append, then says it waits; the next step is `after`. */
async function heldTurn(after = "carrying on after the decision", tenant = T) {
  const s = unique("held");
  const entry = unique("entry");
  await script(s, [{ toolCalls: [{ name: "vault__append", arguments: { entry } }] }, { text: "I asked for approval and will wait." }, { text: after }]);
  await postMessage(tenant, A, { text: `[s:${s}] please record ${entry}`, conversation: s });
  const view = await settled(tenant, A, s);
  const holdId = (await getConversation(tenant, A, s)).holds[0]!.holdId;
  return { s, entry, view, holdId };
}

/** A click on a card through the console, as the console's one person (console:admin). */
function consoleDecision(tenant: string, holdId: string, conversation: string): Promise<Response> {
  return worker(`/console/tenants/${tenant}/agents/${A}/holds/${holdId}`, {
    method: "POST",
    headers: { authorization: "Bearer test-admin-token", "content-type": "application/x-www-form-urlencoded" },
    body: new URLSearchParams({ conversation, approve: "1" }).toString(),
    redirect: "manual",
  });
}

describe("a call under approval", () => {
  it("is recorded as a hold, the model is told it is paused, the turn goes on, and nothing is armed", async () => {
    const { s, entry, view, holdId } = await heldTurn();
    expect(view.transcript.map((e) => e.role)).toEqual(["user", "assistant", "tool", "assistant"]);
    expect(view.transcript[2]!.text).toMatch(new RegExp(`^Held for approval \\(hold ${holdId}\\).*NOT been performed`));
    expect(view.transcript[3]!.text).toBe("I asked for approval and will wait.");
    const [card] = (await getConversation(T, A, s)).holds;
    expect(card).toMatchObject({ state: "pending", tool: "vault__append", requestedBy: "admin", arguments: JSON.stringify({ entry }, null, 2) });
    expect(card!.actions!.approve).toBe(`hold:approve:${T}:${A}:${holdId}`);
    expect(await ledgerAppends(entry)).toHaveLength(0);
    await waitFor("no alarm while the agent is idle", async () => (await alarmOf(T, A)) === null);
  });

  it("approved by an approver: performed once, the agent is told and answers", async () => {
    const { s, entry, holdId } = await heldTurn("Recorded, thanks Ada.");
    const result = await agent(T, A).submit(route, click(holdId, true));
    expect(result.notice).toBe("Approved. Performing it now.");
    const view = await answered(T, A, s, "Recorded, thanks Ada.");
    expect(await ledgerAppends(entry)).toHaveLength(1);
    expect(view.holds[0]).toMatchObject({ state: "performed", decidedBy: "Ada" });
    expect(view.holds[0]!.actions).toBeUndefined();
    const note = view.transcript.at(-2)!;
    expect(note.role).toBe("note");
    expect(note.text).toMatch(new RegExp(`hold ${holdId}\\) was approved by Ada\\. Performed: appended "${entry}" \\(1\\)`));
    const lastRequest = (await providerRequests(s)).at(-1)!;
    expect(JSON.stringify(lastRequest.body.messages)).toContain(`was approved by Ada`);
  });

  it("50 concurrent approve clicks from two approvers → one performance; the others are told it was already decided", async () => {
    const { s, entry, holdId } = await heldTurn();
    // Both listed for the tenant; a tenant is one bridge's, so both click from Slack.
    const users = Array.from({ length: 50 }, (_, i) => (i % 2 === 0 ? APPROVER : { platform: "slack" as const, id: "D_APPROVER", name: "Dee" }));
    const results = await Promise.all(users.map((u) => agent(T, A).submit(route, click(holdId, true, u))));
    const notices = results.map((r) => r.notice);
    expect(notices.filter((n) => n === "Approved. Performing it now.")).toHaveLength(1);
    // A click handled after the courier performed the call (the suite under load) reads "performed".
    expect(notices.filter((n) => /^Already decided: (approved|performed) by /.test(n ?? ""))).toHaveLength(49);
    await settled(T, A, s);
    await waitFor("the hold to be performed", async () => (await getConversation(T, A, s)).holds[0]!.state === "performed");
    expect(await ledgerAppends(entry)).toHaveLength(1);
  });

  it("denied: not performed, the agent is told", async () => {
    const { s, entry, holdId } = await heldTurn("Understood, I will not record it.");
    expect((await agent(T, A).submit(route, click(holdId, false))).notice).toBe("Denied. It will not be performed.");
    const view = await answered(T, A, s, "Understood, I will not record it.");
    expect(view.holds[0]).toMatchObject({ state: "denied", decidedBy: "Ada" });
    expect(view.transcript.at(-2)!.text).toMatch(/was denied by Ada\. It was not performed\./);
    expect(await ledgerAppends(entry)).toHaveLength(0);
    // A later approve changes nothing.
    expect((await agent(T, A).submit(route, click(holdId, true))).notice).toBe("Already decided: denied by Ada.");
    expect(await ledgerAppends(entry)).toHaveLength(0);
  });

  it("expired (its deadline moved into the past): an approve click is answered expired, nothing is performed", async () => {
    const { s, entry, holdId } = await heldTurn("The approval expired, so nothing was recorded.");
    await rows(T, A, "UPDATE holds SET expires_at = ? WHERE id = ?", Date.now() - 1, holdId);
    // A stranger's click changes nothing, not even the expiry (which would wake the agent).
    const stranger = await agent(T, A).submit(route, click(holdId, true, { platform: "slack", id: "U_STRANGER" }));
    expect(stranger.notice).toMatch(/not allowed/);
    expect((await getConversation(T, A, s)).holds[0]!.state).toBe("pending");
    const result = await agent(T, A).submit(route, click(holdId, true));
    expect(result.notice).toBe("This approval has expired; nothing was performed.");
    expect(result.card).toMatchObject({ state: "expired" });
    const view = await answered(T, A, s, "The approval expired, so nothing was recorded.");
    expect(view.transcript.at(-2)!.text).toMatch(/expired before anyone decided/);
    expect(await ledgerAppends(entry)).toHaveLength(0);
  });

  it("an expired hold is reported at the agent's next step without any click or timer", async () => {
    const { s, entry, holdId } = await heldTurn("noted");
    await rows(T, A, "UPDATE holds SET expires_at = ? WHERE id = ?", Date.now() - 1, holdId);
    expect(await alarmOf(T, A)).toBeNull();
    await postMessage(T, A, { text: "any news?", conversation: s });
    const view = await settled(T, A, s);
    expect(view.holds[0]!.state).toBe("expired");
    expect(view.transcript.some((e) => e.role === "note" && /expired before anyone decided/.test(e.text))).toBe(true);
    expect(await ledgerAppends(entry)).toHaveLength(0);
  });

  it("a deny policy set after the hold and before the approval wins", async () => {
    const { s, entry, holdId } = await heldTurn("It was refused by policy.");
    const res = await worker(`/v1/tenants/${T}/agents/${A}/mounts`, {
      method: "PUT",
      headers: { authorization: "Bearer test-admin-token", "content-type": "application/json" },
      body: JSON.stringify([{ alias: "vault", plugin: "ledger", config: { url: (env as unknown as Record<string, string>).FAKE_LEDGER_URL }, policy: { write: "deny" } }]),
    });
    expect(res.status).toBe(200);
    try {
      await agent(T, A).submit(route, click(holdId, true));
      const view = await answered(T, A, s, "It was refused by policy.");
      expect(view.holds[0]).toMatchObject({ state: "refused" });
      expect(view.transcript.at(-2)!.text).toMatch(/Not performed: Refused: the policy of mount "vault" does not allow vault__append/);
      expect(await ledgerAppends(entry)).toHaveLength(0);
    } finally {
      await worker(`/v1/tenants/${T}/agents/${A}/mounts`, {
        method: "PUT",
        headers: { authorization: "Bearer test-admin-token", "content-type": "application/json" },
        body: "[]",
      });
    }
  });

  it("a click by someone not allowed to decide is refused and the hold stays pending", async () => {
    const { s, entry, holdId } = await heldTurn();
    const stranger = { platform: "slack" as const, id: "U_STRANGER", name: "Eve" };
    expect((await agent(T, A).submit(route, click(holdId, true, stranger))).notice).toBe("You are not allowed to decide this approval. It is still waiting.");
    expect((await getConversation(T, A, s)).holds[0]!.state).toBe("pending");
    expect(await ledgerAppends(entry)).toHaveLength(0);
  });

  it("the person who started the conversation may decide their own agent's hold", async () => {
    const s = unique("own");
    const entry = unique("entry");
    await script(s, [{ toolCalls: [{ name: "vault__append", arguments: { entry } }] }, { text: "waiting" }, { text: "done" }]);
    await postMessage(T, A, { text: `[s:${s}] record ${entry}`, conversation: s });
    await settled(T, A, s);
    const holdId = (await getConversation(T, A, s)).holds[0]!.holdId;
    // Conversations from the Agents API are started by the "admin" api user.
    const result = await agent(T, A).submit(route, click(holdId, true, { platform: "api", id: "admin" }));
    expect(result.notice).toBe("Approved. Performing it now.");
    await waitFor("the append", async () => (await ledgerAppends(entry)).length === 1);
  });

  it("only the person who asked (or an approver) decides: not a bystander who spoke first in the conversation", async () => {
    const s = unique("bystander");
    const entry = unique("entry");
    const first = { platform: "slack" as const, id: "U_FIRST", name: "Mallory" };
    const asker = { platform: "slack" as const, id: "U_ASKER", name: "Alice" };
    // Mallory's /status in the empty channel creates nothing, so she is nobody's starter.
    const status = await agent(T, A).submit(route, { id: unique("ev"), kind: "command", command: "status", conversation: s, user: first });
    expect(status.notice).toBe("There is no conversation here yet.");
    await expect(getConversation(T, A, s)).rejects.toThrow(/404/);

    await script(s, [{ text: "hello" }, { toolCalls: [{ name: "vault__append", arguments: { entry } }] }, { text: "waiting" }, { text: "done" }]);
    await agent(T, A).submit(route, { id: unique("ev"), kind: "message", conversation: s, text: `[s:${s}] hi`, user: first });
    await settled(T, A, s);
    await agent(T, A).submit(route, { id: unique("ev"), kind: "message", conversation: s, text: `record ${entry}`, user: asker });
    await settled(T, A, s);
    const [card] = (await getConversation(T, A, s)).holds;
    expect(card!.requestedBy).toBe("Alice");

    expect((await agent(T, A).submit(route, click(card!.holdId, true, first))).notice).toBe("You are not allowed to decide this approval. It is still waiting.");
    // The same id on another platform is another person.
    expect((await agent(T, A).submit(route, click(card!.holdId, true, { platform: "api", id: "U_ASKER" }))).notice).toMatch(/not allowed/);
    expect((await agent(T, A).submit(route, click(card!.holdId, true, asker))).notice).toBe("Approved. Performing it now.");
    await waitFor("the append", async () => (await ledgerAppends(entry)).length === 1);
  });

  it("an approved call that fails says so on the card and to the agent", async () => {
    const s = unique("fails");
    const url = `${(env as unknown as Record<string, string>).FAKE_REMOTE_URL}/no-such-endpoint`;
    await script(s, [{ toolCalls: [{ name: "hooks__post", arguments: { url, body: "x" } }] }, { text: "waiting" }, { text: "It failed." }]);
    await postMessage(T, A, { text: `[s:${s}] post it`, conversation: s });
    await settled(T, A, s);
    const holdId = (await getConversation(T, A, s)).holds[0]!.holdId;
    await agent(T, A).submit(route, click(holdId, true));
    const view = await answered(T, A, s, "It failed.");
    expect(view.holds[0]).toMatchObject({ state: "failed", title: "Approved, but the call failed: hooks__post" });
    expect(view.transcript.at(-2)!.text).toMatch(/Performed, but it failed: HTTP 404/);
  });

  it("a button value made for another tenant is refused", async () => {
    const { s, entry, holdId } = await heldTurn();
    const result = await agent(T, A).submit(route, click(holdId, true, APPROVER, { tenant: "someone-else", agent: A }));
    expect(result.notice).toBe("Refused: this button belongs to another workspace or agent.");
    expect((await getConversation(T, A, s)).holds[0]!.state).toBe("pending");
    expect(await ledgerAppends(entry)).toHaveLength(0);
  });

  it("a tenant named like an Object.prototype member (constructor, toString, valueOf…) decides holds like any other", async () => {
    for (const tenant of ["constructor", "toString", "valueOf", "hasOwnProperty"]) {
      const { s, entry, holdId } = await heldTurn("done", tenant);
      // console:admin is not among this tenant's APPROVERS (it has none): refused, not a 500.
      const refused = await consoleDecision(tenant, holdId, s);
      expect(refused.status, tenant).toBe(303);
      // The console shows the agent's answer on the page it sends the browser back to.
      const cookie = refused.headers.getSetCookie().map((line) => line.split(";")[0]).join("; ");
      const page = await worker(refused.headers.get("location")!, { headers: { authorization: "Bearer test-admin-token", cookie } });
      expect(await page.text()).toMatch(/not allowed to decide/);
      // The person who asked may decide it.
      const own = await agent(tenant, A).submit({ tenant, agent: A }, click(holdId, true, { platform: "api", id: "admin" }, { tenant, agent: A }));
      expect(own.notice, tenant).toBe("Approved. Performing it now.");
      await waitFor(`the append in ${tenant}`, async () => (await ledgerAppends(entry)).length === 1);
    }
  });

  it("a malformed APPROVERS: a click answers 503 naming APPROVERS, writes nothing, and works once it is fixed", async () => {
    const tenant = "console_ok"; // APPROVERS lists console:admin for it
    const { s, entry, holdId } = await heldTurn("Recorded after the fix.", tenant);
    await withVars({ APPROVERS: "{not json" }, async () => {
      const res = await consoleDecision(tenant, holdId, s);
      expect(res.status).toBe(503);
      expect(await res.text()).toMatch(/APPROVERS is not valid JSON/);
    });
    // The refused click was not recorded, and decided nothing.
    expect((await getConversation(tenant, A, s)).holds[0]!.state).toBe("pending");
    expect(await rows(tenant, A, "SELECT * FROM inbound WHERE kind = 'decision'")).toEqual([]);
    expect((await consoleDecision(tenant, holdId, s)).status).toBe(303);
    await answered(tenant, A, s, "Recorded after the fix.");
    expect(await ledgerAppends(entry)).toHaveLength(1);
  });
});

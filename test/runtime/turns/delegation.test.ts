// Subagents (issue 26, acceptance 1): a parent's `delegate` calls run child
// conversations of the same object, three at once and the rest queued; each
// child's answer reaches the parent's call once; stopping the parent stops its
// children; a child cannot delegate and sees only its mounts; its model calls
// are counted as a child's in the tenant's ledger.
import { describe, expect, it } from "vitest";
import { agent } from "../../agents.ts";
import { buttons, conversationOf, isCard, messageEnvelope, newTs, postCommand, postEvent, slackCalls, slackClick, slackId } from "../../bridges/slack/helpers.ts";
import { consoleCookie, getConversation, ledgerAppends, postMessage, providerRequests, releaseProvider, script, settled, unique, waitFor, withVars, worker, type View } from "../../support.ts";

const T = "delegates";
const A = "lead";

type Family = { parent: string | null; children: { id: string; state: string; task: string }[] };
const familyOf = async (conversation: string, tenant = T, agent = A) => ((await getConversation(tenant, agent, conversation)) as View & { family: Family }).family;
const states = async (conversation: string) => (await familyOf(conversation)).children.map((c) => c.state);

/** A parent scenario whose first step delegates one task per child scenario, and whose second answers. */
async function delegating(children: string[], answer: string, more: { mounts?: string[] } = {}) {
  const parent = unique("parent");
  const calls = children.map((child, i) => ({ name: "delegate", id: `d${i}`, arguments: { instructions: `[s:${child}] task ${i + 1}`, ...more } }));
  await script(parent, [{ toolCalls: calls }, { text: answer }]);
  return parent;
}

/** A parent that delegates four tasks whose children's model calls are held: three run, the fourth waits. */
async function fourHeld(prefix: string, answer = "never said") {
  const children = [1, 2, 3, 4].map((n) => unique(`${prefix}${n}`));
  for (const [i, child] of children.entries()) await script(child, [{ hold: true, text: `answer ${i + 1}` }]);
  const parent = await delegating(children, answer);
  await postMessage(T, A, { text: `[s:${parent}] split this in four`, conversation: parent });
  await waitFor("three children asking the model", async () => (await Promise.all(children.slice(0, 3).map(providerRequests))).every((r) => r.length === 1));
  return { children, parent };
}

describe("delegate", () => {
  it("runs three children at once, the fourth when a slot frees, and gives each answer to its call once", { timeout: 60_000 }, async () => {
    const { children, parent } = await fourHeld("c", "all four are done");
    expect(await states(parent)).toEqual(["running", "running", "running", "queued"]);
    expect(await providerRequests(children[3]!)).toHaveLength(0);

    await releaseProvider(children[0]!);
    await waitFor("the fourth child once the first answered", async () => (await providerRequests(children[3]!)).length === 1);
    expect(await states(parent)).toEqual(["answered", "running", "running", "running"]);
    for (const child of children.slice(1)) await releaseProvider(child);

    const view = await waitFor("the parent's answer", async () => {
      const v = await settled(T, A, parent);
      return v.transcript.at(-1)?.text === "all four are done" ? v : undefined;
    });
    const results = view.transcript.filter((e) => e.role === "tool");
    expect(results.map((e) => [e.toolCallId, e.text, e.isError])).toEqual([
      ["d0", "answer 1", false],
      ["d1", "answer 2", false],
      ["d2", "answer 3", false],
      ["d3", "answer 4", false],
    ]);
    // Once each: the parent's second call carries each answer once, and each child asked its model once.
    const second = (await providerRequests(parent))[1]!;
    expect(second.body.messages.filter((m) => m.role === "tool").map((m) => m.content)).toEqual(["answer 1", "answer 2", "answer 3", "answer 4"]);
    for (const child of children) expect(await providerRequests(child)).toHaveLength(1);

    const family = await familyOf(parent);
    expect(family.children.map((c) => [c.state, c.task])).toEqual(children.map((child, i) => ["answered", `[s:${child}] task ${i + 1}`]));
    const first = await getConversation(T, A, family.children[0]!.id);
    expect(first.transcript.map((e) => [e.role, e.text])).toEqual([
      ["user", `[s:${children[0]}] task 1`],
      ["assistant", "answer 1"],
    ]);
    expect(((first as View & { family: Family }).family).parent).toBe(parent);

    // The console: the parent's page lists its children with links; a child's shows its transcript and its parent, and takes no message.
    const cookie = await consoleCookie();
    const page = (id: string) => worker(`/console/tenants/${T}/agents/${A}/conversations/${encodeURIComponent(id)}`, { headers: { cookie } });
    const parentPage = await (await page(parent)).text();
    expect(parentPage).toContain("Child runs");
    for (const child of family.children) expect(parentPage).toContain(`href="/console/tenants/${T}/agents/${A}/conversations/${encodeURIComponent(child.id)}"`);
    const childPage = await page(family.children[0]!.id);
    expect(childPage.status).toBe(200);
    const childHtml = await childPage.text();
    expect(childHtml).toContain(`href="/console/tenants/${T}/agents/${A}/conversations/${parent}" rel="up"`);
    expect(childHtml).toContain("answer 1");
    expect(childHtml).not.toContain("Send a message");
    // Nobody but its parent writes to a child: no bridge or API can name it.
    const sent = await postMessage(T, A, { text: "hello child", conversation: family.children[0]!.id });
    expect(sent.status).toBe(400);
    expect(await sent.text()).toContain("conversation: letters, digits, : . _ - (max 200)");
  });

  it("/stop in the parent's conversation stops its running children, answers the queued one unperformed, and starts nothing after", async () => {
    const { children, parent } = await fourHeld("s");

    const stop = await postMessage(T, A, { kind: "command", command: "stop", conversation: parent });
    expect(await stop.json()).toMatchObject({ accepted: true, notice: "Stopped the running turn." });
    const view = await settled(T, A, parent);
    expect(view.transcript.filter((e) => e.role === "tool").map((e) => [e.text, e.isError])).toEqual([
      ["The child run was stopped before it finished.", true],
      ["The child run was stopped before it finished.", true],
      ["The child run was stopped before it finished.", true],
      ["Not performed: the turn was stopped.", true],
    ]);
    const family = await familyOf(parent);
    expect(family.children.map((c) => c.state)).toEqual(["answered", "answered", "answered", "answered"]);
    for (const child of family.children.slice(0, 3)) expect((await getConversation(T, A, child.id)).status).toBe("idle");
    await expect(getConversation(T, A, family.children[3]!.id)).rejects.toThrow(/404/);

    // The held model calls answer now: their jobs were discarded, so nothing reaches anyone.
    for (const child of children.slice(0, 3)) await releaseProvider(child);
    await waitFor("the held calls answered", async () => (await Promise.all(children.slice(0, 3).map(providerRequests))).every((r) => r[0]!.responded === true));
    expect(await providerRequests(children[3]!)).toHaveLength(0);
    expect(await providerRequests(parent)).toHaveLength(1);
    expect((await getConversation(T, A, parent)).transcript).toEqual(view.transcript);
  });

  it("a parent's turn that fails (a configuration that cannot work) leaves no child running or waiting", async () => {
    const { children, parent } = await fourHeld("f");
    const view = await withVars({ MOUNTS: "[{" }, async () => {
      await postMessage(T, A, { kind: "steer", text: "hurry", conversation: parent });
      return settled(T, A, parent);
    });
    expect(view).toMatchObject({ status: "failed", error: expect.stringMatching(/^configuration error: MOUNTS/) });
    expect(await states(parent)).toEqual(["answered", "answered", "answered", "answered"]);
    const family = await familyOf(parent);
    for (const child of family.children.slice(0, 3)) expect((await getConversation(T, A, child.id)).status).not.toBe("running");
    await expect(getConversation(T, A, family.children[3]!.id)).rejects.toThrow(/404/);
    for (const child of children.slice(0, 3)) await releaseProvider(child);
  });

  it("a child sees only its mounts and no delegate, cannot delegate, and its model calls count to the tenant as a child's", async () => {
    const tenant = unique("deleg");
    const child = unique("only");
    await script(child, [
      { toolCalls: [{ name: "delegate", id: "n1", arguments: { instructions: "[s:nested] go deeper" } }, { name: "memory__recall", id: "m1", arguments: {} }] },
      { text: "did it myself" },
    ]);
    const parent = unique("parent");
    await script(parent, [
      {
        toolCalls: [
          { name: "delegate", id: "d0", arguments: { instructions: `[s:${child}] tell the time`, mounts: ["clock"] } },
          { name: "delegate", id: "d1", arguments: { instructions: "anything", mounts: ["nope"] } },
          { name: "delegate", id: "d2", arguments: { instructions: "  " } },
        ],
      },
      { text: "parent done" },
    ]);
    await postMessage(tenant, A, { text: `[s:${parent}] delegate it`, conversation: parent });
    const view = await waitFor("the parent's answer", async () => {
      const v = await settled(tenant, A, parent);
      return v.transcript.at(-1)?.text === "parent done" ? v : undefined;
    });
    expect(view.transcript.filter((e) => e.role === "tool").map((e) => [e.text, e.isError])).toEqual([
      ["did it myself", false],
      [expect.stringMatching(/^Refused: no mount named nope; the mounts are .*clock/), true],
      [expect.stringMatching(/^Invalid arguments for delegate: instructions: say what the child should do/), true],
    ]);
    const names = (request: { body: { tools?: unknown[] } }) => (request.body.tools as { function: { name: string } }[]).map((t) => t.function.name);
    expect(names((await providerRequests(parent))[0]!)).toContain("delegate");
    const [first] = await providerRequests(child);
    expect(names(first!)).toEqual(["clock__now"]);

    const family = await familyOf(parent, tenant);
    expect(family.children).toHaveLength(1);
    const childView = await getConversation(tenant, A, family.children[0]!.id);
    expect(childView.transcript.filter((e) => e.role === "tool").map((e) => [e.text, e.isError])).toEqual([
      ["Refused: a child run cannot delegate. Do the task yourself.", true],
      ['Not performed: mount "memory" is not one of this child run\'s mounts.', true],
    ]);
    expect((await familyOf(family.children[0]!.id, tenant)).children).toEqual([]);
    expect(await providerRequests("nested")).toHaveLength(0);

    // Four model calls, two of them the child's: the ledger's rows say which.
    const usage = await waitFor("the four calls counted", async () => {
      const res = await worker(`/v1/tenants/${tenant}/usage`, { headers: { authorization: "Bearer test-admin-token" } });
      const body = (await res.json()) as { usage: { calls: number; childCalls: number }[] };
      const sum = body.usage.reduce((t, row) => ({ calls: t.calls + row.calls, childCalls: t.childCalls + row.childCalls }), { calls: 0, childCalls: 0 });
      return sum.calls === 4 ? sum : undefined;
    });
    expect(usage).toEqual({ calls: 4, childCalls: 2 });

    // A script (code mode) of a child limited to `js` reaches no other mount either.
    const coder = unique("coder");
    await script(coder, [{ toolCalls: [{ name: "js__run", arguments: { code: "(async () => await tools.clock.now({}))()" } }] }, { text: "scripted" }]);
    const scripting = unique("parent");
    await script(scripting, [{ toolCalls: [{ name: "delegate", arguments: { instructions: `[s:${coder}] script it`, mounts: ["js"] } }] }, { text: "parent done" }]);
    await postMessage(tenant, A, { text: `[s:${scripting}] delegate a script`, conversation: scripting });
    await waitFor("the scripting parent's answer", async () => (await settled(tenant, A, scripting)).transcript.at(-1)?.text === "parent done");
    const scripted = await getConversation(tenant, A, (await familyOf(scripting, tenant)).children[0]!.id);
    expect(scripted.transcript.find((e) => e.role === "tool")!.text).toMatch(/^Uncaught ToolError: Not performed: mount "clock" is not one of this child run's mounts\./);
  });

  it("a child's step limit and turn limit answer its parent's call with the reason; a bad limit is named", async () => {
    const parentAnswer = async (child: string, vars: Record<string, string>) =>
      withVars(vars, async () => {
        const parent = await delegating([child], "parent done");
        await postMessage(T, A, { text: `[s:${parent}] delegate it`, conversation: parent });
        return settled(T, A, parent);
      });
    const stepped = unique("steps");
    await script(stepped, [{ toolCalls: [{ name: "clock__now", arguments: {} }] }, { text: "never said" }]);
    const steps = await parentAnswer(stepped, { DELEGATE_MAX_STEPS: "1" });
    expect(steps.transcript.find((e) => e.role === "tool")).toMatchObject({
      isError: true,
      text: "The child run failed: the child run reached its step limit (DELEGATE_MAX_STEPS = 1 model calls) before it finished",
    });
    expect(await providerRequests(stepped)).toHaveLength(1);

    // 60 ms: the child's deadline is the object's next due time, and the pass its alarm starts stops the child.
    const slow = unique("slow");
    await script(slow, [{ hold: true, text: "too late" }]);
    const timed = await parentAnswer(slow, { DELEGATE_TURN_MINUTES: "0.001" });
    expect(timed.transcript.find((e) => e.role === "tool")).toMatchObject({
      isError: true,
      text: "The child run failed: the child run reached its time limit (DELEGATE_TURN_MINUTES) before it finished",
    });
    await releaseProvider(slow);

    const bad = await parentAnswer(unique("bad"), { DELEGATE_TURN_MINUTES: "soon" });
    expect(bad).toMatchObject({ status: "failed", error: "configuration error: DELEGATE_TURN_MINUTES is not valid JSON" });
  });

  it("`/agent stop` in the parent's Slack channel stops the parent's turn and its children: one turn stopped, none left running", async () => {
    const team = slackId("T");
    const channel = slackId("C");
    const ts = newTs();
    const children = [unique("k1"), unique("k2")];
    for (const child of children) await script(child, [{ hold: true, text: "too late" }]);
    const parent = await delegating(children, "never said");
    await postEvent(messageEnvelope({ team, channel, ts, text: `[s:${parent}] two tasks` }));
    await waitFor("both children asking the model", async () => (await Promise.all(children.map(providerRequests))).every((r) => r.length === 1));

    const res = await postCommand({ team_id: team, channel_id: channel, user_id: "UPERSON1", command: "/agent", text: "stop", trigger_id: unique("trig") });
    expect(await res.json()).toEqual({ response_type: "ephemeral", text: "Stopped 1 running turn in this channel." });
    const conversation = conversationOf(team, channel, ts);
    const view = await settled(team, "assistant", conversation);
    expect(view.transcript.filter((e) => e.role === "tool").map((e) => e.text)).toEqual(children.map(() => "The child run was stopped before it finished."));
    for (const child of (await familyOf(conversation, team, "assistant")).children) expect((await getConversation(team, "assistant", child.id)).status).toBe("idle");
    for (const child of children) await releaseProvider(child);
  });

  it("a child's held call is a card in its parent's Slack thread, decided there like any other", async () => {
    const team = "T_APPROVALS";
    const channel = slackId("C");
    const ts = newTs();
    const entry = unique("entry");
    const child = unique("held");
    await script(child, [{ toolCalls: [{ name: "vault__append", arguments: { entry } }] }, { text: "asked for approval" }]);
    const parent = unique("parent");
    await script(parent, [{ toolCalls: [{ name: "delegate", arguments: { instructions: `[s:${child}] record ${entry}` } }] }, { text: "the child asked" }]);
    await postEvent(messageEnvelope({ team, channel, ts, text: `[s:${parent}] record it`, user: "U_ASKER" }));
    const card = await waitFor("the card in the parent's thread", async () => (await slackCalls(channel, "chat.postMessage")).find(isCard));
    expect(card.body.thread_ts).toBe(ts);
    expect(card.body.text).toMatch(/Approval needed: vault__append/);
    const family = await familyOf(conversationOf(team, channel, ts), team, "assistant");
    expect((await getConversation(team, "assistant", family.children[0]!.id)).holds).toHaveLength(1);
    // The channel's threads, as the Slack bridge lists them (for /agent stop, status, compact): the child is none.
    const listed = await agent(team, "assistant").conversations({ tenant: team, agent: "assistant" }, `${team}:${channel}:`);
    expect(listed.map((c) => c.id)).toEqual([conversationOf(team, channel, ts)]);

    await slackClick(team, channel, ts, card.ts!, buttons(card)[0]!.value!, "U_APPROVER", unique("resp"));
    await waitFor("the card updated in place", async () =>
      (await slackCalls(channel, "chat.update")).find((c) => c.body.ts === card.ts && c.body.text?.includes("Approved and performed")),
    );
    expect(await ledgerAppends(entry)).toHaveLength(1);
  });
});



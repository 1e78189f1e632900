// Code mode: a js__run script calls the agent's other tools through the
// gateway, under the same policy as a direct call, each call journaled under
// the script's own key; the script runs in a courier, so the object answers
// other conversations while it waits, and in slices, so it answers them while
// the script computes too; a courier crash mid-script does not repeat a write
// the script already made.
import { env } from "cloudflare:workers";
import { runDurableObjectAlarm } from "cloudflare:test";
import { beforeAll, describe, expect, it } from "vitest";
import type { ChatEvent } from "../../../runtime/index.ts";
import { agent, courier, evictCourier, rows, storedText } from "../../agents.ts";
import {
  answered,
  getConversation,
  holdLedger,
  ledgerAppends,
  ledgerReads,
  postMessage,
  providerRequests,
  releaseLedger,
  script,
  settled,
  unique,
  waitFor,
  worker,
  type View,
} from "../../support.ts";

const T = "codemode";
const A = "scripter";
const testEnv = env as unknown as Record<string, string>;
const ADMIN = { authorization: "Bearer test-admin-token", "content-type": "application/json" };

/** Per-agent mounts on top of MOUNTS: a ledger whose writes are denied, and (for one agent) a js mount with a short wall limit. */
async function mount(agentName: string, mounts: unknown[]): Promise<void> {
  const res = await worker(`/v1/tenants/${T}/agents/${agentName}/mounts`, { method: "PUT", headers: ADMIN, body: JSON.stringify(mounts) });
  expect(res.status).toBe(200);
}

beforeAll(async () => {
  await mount(A, [{ alias: "locked", plugin: "ledger", config: { url: testEnv.FAKE_LEDGER_URL }, policy: { write: "deny" } }]);
});

/** Starts a turn in which the model runs each script with js__run, one per step, then answers "Done." */
async function start(agentName: string, ...codes: string[]): Promise<string> {
  const s = unique("code");
  await script(s, [...codes.map((code) => ({ toolCalls: [{ name: "js__run", arguments: { code } }] })), { text: "Done." }]);
  await postMessage(T, agentName, { text: `[s:${s}] go`, conversation: s });
  return s;
}

async function turn(...codes: string[]): Promise<{ s: string; view: View; results: View["transcript"] }> {
  const s = await start(A, ...codes);
  const view = await settled(T, A, s, 25_000);
  expect(view.transcript.at(-1)).toMatchObject({ role: "assistant", text: "Done." });
  return { s, view, results: view.transcript.filter((e) => e.role === "tool") };
}

const journal = (s: string, agentName = A) =>
  rows<{ key: string; name: string; status: string }>(T, agentName, "SELECT key, name, status FROM tool_calls WHERE conversation = ? ORDER BY started_at, key", s);

describe("a script that calls tools", () => {
  it("calls two tools and joins their results in one model step: the provider sees one tool call, the receiver two", async () => {
    const [e1, e2] = [unique("one"), unique("two")];
    const { s, results } = await turn(`(async () => {
      const [a, b] = await Promise.all([tools.ledger.append({ entry: "${e1}" }), tools.ledger.append({ entry: "${e2}" })]);
      return a + " + " + b;
    })()`);
    expect(results).toHaveLength(1);
    expect(results[0]).toMatchObject({ isError: false, text: `Result: ${JSON.stringify(`appended "${e1}" (1) + appended "${e2}" (1)`)}` });

    // One model step for the script: two requests in all (the call, then the answer), the second carrying one tool result.
    const requests = await providerRequests(s);
    expect(requests).toHaveLength(2);
    const messages = requests[1]!.body.messages;
    expect(messages.filter((m) => m.role === "tool")).toHaveLength(1);
    expect(messages.flatMap((m) => ((m as { tool_calls?: unknown[] }).tool_calls ?? []))).toHaveLength(1);

    // The receiver saw both, each with the key of its journal row: a child of the script's own call.
    const [one, two] = [await ledgerAppends(e1), await ledgerAppends(e2)];
    expect(one).toHaveLength(1);
    expect(two).toHaveLength(1);
    const calls = await journal(s);
    const parent = calls.find((c) => c.name === "js__run")!;
    expect(calls.map((c) => [c.key, c.name, c.status]).sort()).toEqual(
      [[parent.key, "js__run", "done"], [`${parent.key}/1`, "ledger__append", "done"], [`${parent.key}/2`, "ledger__append", "done"]].sort(),
    );
    expect([one[0]!.key, two[0]!.key]).toEqual([`${parent.key}/1`, `${parent.key}/2`]);
  });

  it("is told in the tool's description which tools it can call, with their parameters in TypeScript-like form", async () => {
    const { s } = await turn("1");
    const tools = (await providerRequests(s))[0]!.body.tools as { function: { name: string; description: string } }[];
    const run = tools.find((t) => t.function.name === "js__run")!.function.description;
    expect(run).toContain("tools.ledger.append(args: { entry: string }): Promise<string> // write. Append an entry to the ledger (not idempotent).");
    expect(run).toContain("tools.clock.now(args: { timeZone?: string");
    expect(run).toMatch(/tools\.vault\.append\(args: \{ entry: string \}\): Promise<string> \/\/ write\. .*Needs a person's approval/);
    // A denied tool is not offered, a tool that runs scripts is not either; denied reads of the same mount are.
    expect(run).not.toContain("tools.locked.append");
    expect(run).toContain("tools.locked.read(");
    expect(run).not.toContain("tools.js.run");
  });

  it("gets a deny as a rejected promise with the reason, and a mistyped name with the nearest names; nothing is performed", async () => {
    const entry = unique("denied");
    const { results } = await turn(`(async () => {
      const out = [];
      for (const attempt of [() => tools.locked.append({ entry: "${entry}" }), () => tools.ledgr.apend({ entry: "${entry}" }), () => tools.ledger.append({ entry: 7 })]) {
        try { out.push(await attempt()); } catch (e) { out.push(e.name + ": " + e.message); }
      }
      return out;
    })()`);
    const [denied, mistyped, invalid] = JSON.parse(results[0]!.text.replace(/^Result: /, "")) as string[];
    expect(denied).toBe('ToolError: Refused: the policy of mount "locked" does not allow locked__append.');
    // Denied tools are not suggested (locked.append is as near as ledger.read).
    expect(mistyped).toBe("ToolError: No tool ledgr.apend is mounted. Nearest: ledger.append, ledger.read, vault.append.");
    expect(invalid).toMatch(/^ToolError: Invalid arguments for ledger__append: /);
    expect(await ledgerAppends(entry)).toHaveLength(0);
  });

  it("calling an approval tool makes a hold and a card, and the script gets the held result; approved, it is performed once", async () => {
    const entry = unique("held");
    const { s, results } = await turn(`(async () => await tools.vault.append({ entry: "${entry}" }))()`);
    expect(results[0]!.text).toMatch(/^Result: "Held for approval \(hold [^)]+\): a person has been asked in the chat to approve vault__append\. It has NOT been performed yet\./);
    const [card] = (await getConversation(T, A, s)).holds;
    expect(card).toMatchObject({ state: "pending", tool: "vault__append", arguments: JSON.stringify({ entry }, null, 2) });
    expect(await ledgerAppends(entry)).toHaveLength(0);

    // The hold is the script's call: its key is a child of the script's, and a person's approval performs it once.
    const parent = (await journal(s)).find((c) => c.name === "js__run")!;
    const [hold] = await rows<{ call_key: string }>(T, A, "SELECT call_key FROM holds WHERE id = ?", card!.holdId);
    expect(hold!.call_key).toBe(`${parent.key}/1`);
    // The person whose message started the turn may decide its holds.
    const approver = { platform: "api" as const, id: "admin" };
    const click: ChatEvent = { id: unique("click"), kind: "decision", conversation: s, holdId: card!.holdId, approve: true, boundTo: { tenant: T, agent: A }, user: approver };
    expect((await agent(T, A).submit({ tenant: T, agent: A }, click)).notice).toBe("Approved. Performing it now.");
    await waitFor("the approved call", async () => (await getConversation(T, A, s)).holds[0]!.state === "performed");
    expect(await ledgerAppends(entry)).toHaveLength(1);
    expect((await ledgerAppends(entry))[0]!.key).toBe(`${parent.key}/1`);
  });

  it("is stopped at its CPU and memory limits (while(true){} and Array(1e9).fill(0)), and the next call works", async () => {
    const { results } = await turn("while (true) {}", "Array(1e9).fill(0)", "(async () => (await tools.clock.now({ timeZone: 'UTC' })).length > 0)()");
    expect(results.map((r) => [r.isError, r.text])).toEqual([
      [true, "CPU time limit: the code was stopped after 2000 ms of computation."],
      [true, "Memory limit: the code used more than 16 MiB."],
      [false, "Result: true"],
    ]);
  });

  it("keeps a secret a tool echoes out of the script, its answer and every table", async () => {
    const { results } = await turn(`(async () => (await tools.api.get({ url: "${testEnv.FAKE_REMOTE_URL}/echo" })))()`);
    expect(results[0]!.text).toMatch(/youSent/);
    expect(results[0]!.text).toContain("[redacted]");
    expect(await storedText(T, A)).not.toContain(testEnv.REMOTE_API_TOKEN!);
  });
});

describe("a script waiting for a tool", () => {
  it("does not hold up the agent: another conversation is answered meanwhile", async () => {
    const entry = unique("slow");
    await holdLedger("read", entry);
    const s = await start(A, `(async () => await tools.ledger.read({ entry: "${entry}" }))()`);
    try {
      await waitFor("the script's read to reach the ledger", async () => (await ledgerReads(entry)).length === 1);
      const other = unique("other");
      await script(other, [{ text: "meanwhile" }]);
      await postMessage(T, A, { text: `[s:${other}] hello`, conversation: other });
      await answered(T, A, other, "meanwhile");
      expect((await getConversation(T, A, s)).status).not.toBe("idle");
    } finally {
      await releaseLedger("read", entry);
    }
    const view = await settled(T, A, s);
    expect(view.transcript.find((e) => e.role === "tool")).toMatchObject({ isError: false, text: `Result: ${JSON.stringify(`0 entries for "${entry}"`)}` });
  });

  it("is stopped at its wall time limit, tool calls included, and the turn goes on", async () => {
    const hurried = "hurried";
    await mount(hurried, [{ alias: "js", plugin: "js", config: { wallMs: 300 } }]);
    const entry = unique("never");
    await holdLedger("read", entry);
    try {
      const s = await start(hurried, `(async () => await tools.ledger.read({ entry: "${entry}" }))()`);
      const view = await settled(T, hurried, s, 25_000);
      expect(view.transcript.find((e) => e.role === "tool")).toMatchObject({
        isError: true,
        text: "Wall time limit: the script was stopped after 300 ms, tool calls included (1 calls made, 1 unanswered).",
      });
      expect(view.transcript.at(-1)).toMatchObject({ role: "assistant", text: "Done." });
    } finally {
      await releaseLedger("read", entry);
    }
  });

  it("stopped with its turn makes no further call", async () => {
    const [first, second] = [unique("first"), unique("second")];
    await holdLedger("read", first);
    const s = await start(A, `(async () => { await tools.ledger.read({ entry: "${first}" }); return await tools.ledger.append({ entry: "${second}" }); })()`);
    await waitFor("the script's read to reach the ledger", async () => (await ledgerReads(first)).length === 1);
    await postMessage(T, A, { kind: "interrupt", text: "stop", conversation: s });
    await releaseLedger("read", first);
    await settled(T, A, s);
    await waitFor("the courier to be done", async () => (await rows(T, A, "SELECT kind FROM effects WHERE conversation = ?", s)).length === 0);
    expect(await ledgerAppends(second)).toHaveLength(0);
    expect((await journal(s)).map((c) => c.name)).not.toContain("ledger__append");
  });
});

describe("a script that computes without end", () => {
  it("does not hold up the agent: while it spins at its limit, another conversation is accepted in < 1 s and answered", async () => {
    const spinner = "spinner";
    await mount(spinner, [{ alias: "js", plugin: "js", config: { cpuMs: 10_000, wallMs: 60_000 } }]);
    const entry = unique("spin");
    const s = await start(spinner, `(async () => { await tools.ledger.append({ entry: "${entry}" }); for (;;) {} })()`);
    // Its call answered, the script runs on into the loop at once.
    await waitFor("the script's call to be done", async () => (await journal(s, spinner)).some((c) => c.name === "ledger__append" && c.status === "done"));
    const other = unique("other");
    await script(other, [{ text: "meanwhile" }]);
    const sent = Date.now();
    const accepted = await postMessage(T, spinner, { text: `[s:${other}] hello`, conversation: other });
    const acceptMs = Date.now() - sent;
    expect(accepted.status).toBe(202);
    expect(acceptMs).toBeLessThan(1_000);
    await answered(T, spinner, other, "meanwhile");
    // Answered while the script still spins: its result has not come.
    expect((await getConversation(T, spinner, s)).transcript.filter((e) => e.role === "tool")).toEqual([]);
    const view = await settled(T, spinner, s, 30_000);
    expect(view.transcript.find((e) => e.role === "tool")).toMatchObject({ isError: true, text: "CPU time limit: the code was stopped after 10000 ms of computation." });
  }, 45_000);

  it("a BigInt loop is stopped at the wall limit (inside its long built-in calls), and the turn goes on", async () => {
    const bigint = "bigint";
    await mount(bigint, [{ alias: "js", plugin: "js", config: { cpuMs: 10_000, wallMs: 1_000 } }]);
    const s = await start(bigint, "for (;;) (10n ** 150000n).toString()");
    const view = await settled(T, bigint, s, 25_000);
    expect(view.transcript.find((e) => e.role === "tool")).toMatchObject({
      isError: true,
      text: "Wall time limit: the script was stopped after 1000 ms, tool calls included (0 calls made, 0 unanswered).",
    });
    expect(view.transcript.at(-1)).toMatchObject({ role: "assistant", text: "Done." });
  });
});

describe("a courier evicted mid-script", () => {
  it("does not repeat a non-idempotent write the script already made: the re-run gets the recorded answer, and the write in flight is unknown", async () => {
    const [done, inFlight] = [unique("done"), unique("inflight")];
    await holdLedger("append", inFlight);
    const s = await start(A, `(async () => {
      const a = await tools.ledger.append({ entry: "${done}" });
      try { return [a, await tools.ledger.append({ entry: "${inFlight}" })]; } catch (e) { return [a, e.name + ": " + e.message]; }
    })()`);
    await waitFor("the second append to reach the ledger", async () => (await ledgerAppends(inFlight)).length === 1);
    await evictCourier(courier(T, A, "tool", s));
    await releaseLedger("append", inFlight);
    // The courier's watchdog alarm resumes its task: the script runs again from the start.
    expect(await runDurableObjectAlarm(courier(T, A, "tool", s))).toBe(true);
    const view = await settled(T, A, s, 25_000);
    expect(await ledgerAppends(done)).toHaveLength(1);
    expect(await ledgerAppends(inFlight)).toHaveLength(1);
    const [a, b] = JSON.parse(view.transcript.find((e) => e.role === "tool")!.text.replace(/^Result: /, "")) as string[];
    expect(a).toBe(`appended "${done}" (1)`);
    expect(b).toMatch(/^ToolError: The outcome of ledger__append is unknown: it was started but the runtime restarted before it answered/);
  });
});

describe("the object's side of a script's call", () => {
  it("refuses a call whose script is not running, a malformed one, and a report of a call that is not a script's", async () => {
    const route = { tenant: T, agent: A };
    const stub = agent(T, A);
    expect(await stub.claimScriptCall(route, { parentKey: "nobody:1:x", n: 1, alias: "ledger", tool: "append", args: { entry: "x" } })).toEqual({
      kind: "answer",
      output: { text: "Not performed: the script's own call is not known.", isError: true },
    });
    const malformed = await stub.claimScriptCall(route, { parentKey: "nobody:1:x", n: 0, alias: "ledger", tool: "append", args: {} });
    expect(malformed).toMatchObject({ kind: "answer", output: { isError: true, text: expect.stringMatching(/^Not performed: a malformed tool call/) } });
    // A direct call (no "/<n>" child key) is reported through report, which also ends its effect.
    const { s } = await turn("1");
    const [direct] = await journal(s);
    const report = { result: { text: "forged", disposition: "performed" as const }, alias: "ledger", session: {} };
    expect(await stub.reportScriptCall(route, direct!.key, report)).toEqual({ text: "Not recorded: there is no such call of a script.", isError: true });
    expect((await rows<{ result: string }>(T, A, "SELECT result FROM tool_calls WHERE key = ?", direct!.key))[0]!.result).not.toContain("forged");
  });
});

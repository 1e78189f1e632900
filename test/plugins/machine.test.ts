// The machine plugin in real conversations: the fake model issues tool calls,
// each goes through the gateway and a courier to the local backend (the real
// machine host, each machine a bubblewrap sandbox), and the results come back
// to the model. Approval, network and secrets as the mount configures them.
import { env } from "cloudflare:workers";
import { afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { HostBackend } from "../../machines/index.ts";
import { machineId } from "../../plugins/machine.ts";
import { agent, alarmOf, fireAlarm, rows, storedText } from "../agents.ts";
import { captureConsole } from "../leaks.ts";
import { answered, consoleCookie, getConversation, postMessage, providerRequests, releaseProvider, script, settled, unique, waitFor, withVars, worker, type ScriptStep, type View } from "../support.ts";

const E = env as unknown as Record<string, string>;
const ADMIN = { authorization: "Bearer test-admin-token", "content-type": "application/json" };
const T = "machine";
const REQUESTER = { platform: "api" as const, id: "admin" };

function host(): HostBackend {
  return new HostBackend(E.MACHINE_HOST_URL!, E.MACHINE_HOST_TOKEN!);
}

/** What the host's own window shows: its log, and whether anything of a machine is left. */
async function hostWindow<T>(path: string): Promise<T> {
  return (await fetch(`${E.MACHINE_HOST_WINDOW_URL}${path}`)).json() as Promise<T>;
}

function boxMount(config: Record<string, unknown> = {}, more: Record<string, unknown> = {}) {
  return { alias: "box", plugin: "machine", config: { memoryMiB: 512, diskMiB: 64, ...config }, ...more };
}

async function mount(name: string, mounts: unknown[]): Promise<void> {
  const res = await worker(`/v1/tenants/${T}/agents/${name}/mounts`, { method: "PUT", headers: ADMIN, body: JSON.stringify(mounts) });
  expect(res.status, await res.clone().text()).toBe(200);
}

async function turn(name: string, steps: ScriptStep[]): Promise<{ view: View; s: string; conversation: string }> {
  const s = unique("box");
  const conversation = unique("c");
  await script(s, steps);
  await postMessage(T, name, { text: `[s:${s}] go`, conversation });
  return { view: await settled(T, name, conversation), s, conversation };
}

const toolResults = (view: View) => view.transcript.filter((e) => e.role === "tool");
const machineOf = (name: string, conversation: string) => machineId({ tenant: T, agent: name, alias: "box", conversation });

beforeAll(() => {
  if (E.MACHINE_HOST_MISSING) throw new Error(`the local machine backend cannot run here: ${E.MACHINE_HOST_MISSING}`);
});

afterEach(() => vi.restoreAllMocks());

describe("the machine plugin in a conversation (local backend)", () => {
  it("writes a file, runs sh -c over it and reads the result back, all through the gateway; release destroys the machine, processes and folder", async () => {
    const A = "worker";
    await mount(A, [boxMount({}, { policy: { tools: { exec: "allow" } } })]);
    const s = unique("box");
    const conversation = unique("c");
    await script(s, [
      { toolCalls: [{ name: "box__write_file", arguments: { path: "notes.txt", content: "alpha\nbeta\n" } }] },
      { toolCalls: [{ name: "box__exec", arguments: { command: "sh -c 'tr a-z A-Z < notes.txt > upper.txt && wc -l < upper.txt' && (sleep 811.5 &)" } }] },
      { toolCalls: [{ name: "box__read_file", arguments: { path: "upper.txt" } }, { name: "box__list", arguments: {} }] },
      { toolCalls: [{ name: "box__release", arguments: {} }] },
      { text: "ALPHA BETA, and the machine is gone.", hold: true },
    ]);
    await postMessage(T, A, { text: `[s:${s}] go`, conversation });
    // The release closed the machine's lease at once: the turn still runs (its last model call is held), and nothing is left to end.
    await waitFor("the model call after the release", async () => (await providerRequests(s)).length === 5);
    expect(await rows(T, A, "SELECT * FROM leases")).toEqual([]);
    await releaseProvider(s);
    const view = await settled(T, A, conversation);
    expect(view.status).toBe("idle");
    const [write, exec, read, list, release] = toolResults(view);
    expect(write).toMatchObject({ text: "(A new machine was started for this call: its workspace /workspace was empty.)\nWrote /workspace/notes.txt (11 bytes now).", isError: false });
    expect(exec!.text).toMatch(/^exit code 0 \(\d+\.\d s\)\nstdout:\n2\n\nstderr: \(empty\)$/);
    expect(read).toMatchObject({ text: "ALPHA\nBETA\n", isError: false });
    // Locally /tmp is the workspace's .tmp: it counts toward the machine's disk.
    expect(list!.text).toBe("/workspace:\n.tmp/\nnotes.txt  11 bytes\nupper.txt  11 bytes");
    expect(release).toMatchObject({ text: "The machine was released: its processes were ended and its files removed.", isError: false });
    // The model was given each result in turn.
    expect(JSON.stringify((await providerRequests(s)).at(-1)!.body.messages)).toContain("ALPHA\\nBETA\\n");
    // Released: nothing of the machine is left on the host, not even the process it left in the background.
    const id = await machineOf(A, conversation);
    expect(await host().status(id)).toBeUndefined();
    expect(await hostWindow<number[]>("/processes?marker=811.5")).toEqual([]);
    expect(await hostWindow<{ exists: boolean }>(`/folder?id=${id}`)).toEqual({ exists: false });
  });

  it("holds exec for approval by default: a card, nothing run, then performed once after Approve", async () => {
    const A = "careful";
    await mount(A, [boxMount()]);
    const { view, conversation } = await turn(A, [
      { toolCalls: [{ name: "box__exec", arguments: { command: "echo ran >> runs.txt; cat runs.txt" } }] },
      { text: "I asked for approval." },
      { toolCalls: [{ name: "box__read_file", arguments: { path: "runs.txt" } }] },
      { text: "It ran once." },
    ]);
    expect(view.transcript.find((e) => e.role === "tool")!.text).toMatch(/^Held for approval/);
    const [card] = view.holds;
    expect(card).toMatchObject({ state: "pending", tool: "box__exec", arguments: JSON.stringify({ command: "echo ran >> runs.txt; cat runs.txt" }, null, 2) });
    // Nothing ran: no machine was even started.
    const id = await machineOf(A, conversation);
    expect(await host().status(id)).toBeUndefined();

    const decided = await agent(T, A).submit({ tenant: T, agent: A }, { id: unique("click"), kind: "decision", conversation: "ignored", holdId: card!.holdId, approve: true, boundTo: { tenant: T, agent: A }, user: REQUESTER });
    expect(decided.notice).toBe("Approved. Performing it now.");
    const after = await waitFor("the answer after the approval", async () => {
      const v = await getConversation(T, A, conversation);
      return v.status === "idle" && v.transcript.at(-1)?.text === "It ran once." ? v : undefined;
    });
    expect(after.holds[0]).toMatchObject({ state: "performed" });
    expect(toolResults(after).at(-1)).toMatchObject({ text: "ran\n", isError: false });
    await host().destroy(id);
  });

  it("with network off, a command cannot reach 127.0.0.1 (which the Worker itself reaches)", async () => {
    const A = "offline";
    const target = `${E.FAKE_REMOTE_URL}/page`;
    expect((await fetch(target)).status).toBe(200);
    await mount(A, [boxMount({}, { policy: { tools: { exec: "allow" } } })]);
    const { view, conversation } = await turn(A, [{ toolCalls: [{ name: "box__exec", arguments: { command: `curl -sS -m 5 ${target}` } }] }, { text: "no network" }]);
    const [result] = toolResults(view);
    expect(result!.isError).toBe(true);
    expect(result!.text).toMatch(/exit code 7 .*Failed to connect to 127\.0\.0\.1/s);
    await host().destroy(await machineOf(A, conversation));
  });

  it("with allowed hosts, a command reaches those through the machine's proxy and nothing else", async () => {
    const A = "online";
    const allowed = new URL(E.FAKE_REMOTE_URL!);
    const other = new URL(E.FAKE_LEDGER_URL!);
    await mount(A, [boxMount({ network: { allowedHosts: [allowed.host] } }, { policy: { tools: { exec: "allow" } } })]);
    const { view, conversation } = await turn(A, [
      {
        toolCalls: [
          { name: "box__exec", arguments: { command: `curl -sS -m 5 ${allowed.origin}/page` } },
          { name: "box__exec", arguments: { command: `curl -sS -m 5 -o /dev/null -w '%{http_code}' ${other.origin}/appends?entry=x` } },
          { name: "box__exec", arguments: { command: `curl -sS -m 5 --noproxy '*' ${allowed.origin}/page` } },
        ],
      },
      { text: "checked" },
    ]);
    const [through, refused, direct] = toolResults(view);
    expect(through!.text).toMatch(/exit code 0 .*All systems go/s);
    expect(refused!.text).toMatch(/stdout:\n403/);
    expect(direct!.text).toMatch(/exit code 7 .*Failed to connect/s);
    await host().destroy(await machineOf(A, conversation));
  });

  it("keeps the mount's keep folders across a release: the conversation's next machine has them, and nothing else", async () => {
    const A = "keeper";
    await mount(A, [boxMount({ keep: ["cache"] }, { policy: { tools: { exec: "allow" } } })]);
    const { view, s, conversation } = await turn(A, [
      { toolCalls: [{ name: "box__write_file", arguments: { path: "cache/data.txt", content: "keep me" } }, { name: "box__write_file", arguments: { path: "scratch.txt", content: "lose me" } }] },
      { toolCalls: [{ name: "box__release", arguments: {} }] },
      { text: "released" },
      { toolCalls: [{ name: "box__read_file", arguments: { path: "cache/data.txt" } }] },
      { toolCalls: [{ name: "box__list", arguments: {} }] },
      { text: "restored" },
    ]);
    expect(toolResults(view).at(-1)).toMatchObject({ text: "The machine was released: its processes were ended and its files removed. Its kept folders (cache) were saved for the next machine." });
    await postMessage(T, A, { text: `[s:${s}] again`, conversation });
    const next = await answered(T, A, conversation, "restored");
    const [read, list] = toolResults(next).slice(-2);
    expect(read!.text).toBe("(A new machine was started for this call: its workspace /workspace was empty. Its kept folders (cache) were restored from the machine before it.)\nkeep me");
    expect(list!.text).not.toContain("scratch.txt");
    await host().destroy(await machineOf(A, conversation));
  });

  it("postpone is recorded once per machine for the lease; a second is refused, and without a machine there is nothing to postpone", async () => {
    const A = "postponer";
    await mount(A, [boxMount({}, { policy: { tools: { exec: "allow" } } })]);
    const { view, conversation } = await turn(A, [
      { toolCalls: [{ name: "box__postpone", arguments: {} }] },
      { toolCalls: [{ name: "box__exec", arguments: { command: "true" } }] },
      { toolCalls: [{ name: "box__postpone", arguments: {} }] },
      { toolCalls: [{ name: "box__postpone", arguments: {} }] },
      { text: "done" },
    ]);
    const [none, , first, second] = toolResults(view);
    expect(none).toMatchObject({ isError: true, text: "There is no machine to keep: a call that needs one starts it." });
    expect(first).toMatchObject({ isError: false, text: "Postponed: the machine's idle limit is extended once, by its full length." });
    expect(second).toMatchObject({ isError: true, text: "This machine's idle limit was already postponed once; it cannot be postponed again." });
    const id = await machineOf(A, conversation);
    const [kept] = await rows<{ value: string }>(T, A, "SELECT value FROM mount_sessions WHERE alias = 'box' AND key = 'lease_postponed'");
    expect(Object.keys(JSON.parse(kept!.value) as Record<string, unknown>)).toEqual([id]);
    await host().destroy(id);
  });

  it("says no machine backend is available when there is none, and the turn goes on", async () => {
    const A = "nomachine";
    await mount(A, [boxMount({}, { policy: { tools: { exec: "allow" } } })]);
    const { view } = await withVars({ MACHINE_BACKEND: "none" }, () => turn(A, [{ toolCalls: [{ name: "box__exec", arguments: { command: "true" } }] }, { text: "no machine" }]));
    expect(toolResults(view)[0]).toMatchObject({ isError: true, text: expect.stringMatching(/^No machine backend is available: MACHINE_BACKEND is none/) });
    expect(view.transcript.at(-1)!.text).toBe("no machine");
  });
});

/** The model is warned this long before its machine is destroyed for being idle. */
const IDLE_WARNING_MS = 5 * 60_000;
type Lease = { alias: string; conversation: string; expires_at: number; idle_ms: number; postponed: number; warned: number; state: string };
const leaseOf = async (name: string, conversation: string) => (await rows<Lease>(T, name, "SELECT * FROM leases WHERE conversation = ?", conversation))[0];

/** Waits until nothing of the machine is left on the host: no machine, no process of it, no folder (the host forgets a machine first, then cleans up). */
async function gone(id: string, marker: string): Promise<void> {
  await waitFor("the machine, its processes and its folder to be gone", async () => {
    const machine = await host().status(id);
    const processes = await hostWindow<number[]>(`/processes?marker=${marker}`);
    const folder = await hostWindow<{ exists: boolean }>(`/folder?id=${id}`);
    return machine === undefined && processes.length === 0 && !folder.exists;
  });
}

describe("the lease: a machine lives while its conversation has something open", () => {
  it("destroys the machine in the pass after its turn settles (no process, no folder); the next turn gets a fresh one with the keep folders restored; the agent is then idle", async () => {
    const A = "leased";
    await mount(A, [boxMount({ keep: ["cache"] }, { policy: { tools: { exec: "allow" } } })]);
    const { view, s, conversation } = await turn(A, [
      { toolCalls: [{ name: "box__write_file", arguments: { path: "cache/data.txt", content: "keep me" } }, { name: "box__write_file", arguments: { path: "scratch.txt", content: "lose me" } }] },
      { toolCalls: [{ name: "box__exec", arguments: { command: "(sleep 812.5 &)" } }] },
      { text: "written" },
      { toolCalls: [{ name: "box__read_file", arguments: { path: "cache/data.txt" } }, { name: "box__list", arguments: {} }] },
      { text: "read again" },
    ]);
    expect(view.transcript.at(-1)!.text).toBe("written");
    const id = await machineOf(A, conversation);
    // Ended by the pass that settled the turn (the turn is seen idle a moment before that pass reaches its leases): no alarm, no idle limit.
    await waitFor("the lease to be ending", async () => (await leaseOf(A, conversation))?.state !== "open", 2000);
    await gone(id, "812.5");
    await waitFor("the lease to be closed", async () => (await leaseOf(A, conversation)) === undefined);
    await waitFor("the agent to have nothing armed", async () => (await alarmOf(T, A)) === null);

    await postMessage(T, A, { text: `[s:${s}] again`, conversation });
    const next = await answered(T, A, conversation, "read again");
    const [read, list] = toolResults(next).slice(-2);
    expect(read!.text).toBe("(A new machine was started for this call: its workspace /workspace was empty. Its kept folders (cache) were restored from the machine before it.)\nkeep me");
    expect(list!.text).not.toContain("scratch.txt");
    await waitFor("the second machine to be destroyed", async () => (await host().status(id)) === undefined);
    await waitFor("the agent to have nothing armed", async () => (await alarmOf(T, A)) === null);
  });

  it("holds the machine while a call waits for approval; warns the model 5 minutes before the idle limit, postpone extends once by its length, and at the limit it is destroyed", async () => {
    const A = "lingering";
    await mount(A, [boxMount({}, { policy: { tools: { exec: "allow", write_file: "approval" } } })]);
    const { s, conversation } = await turn(A, [
      { toolCalls: [{ name: "box__exec", arguments: { command: "(sleep 813.5 &)" } }] },
      { toolCalls: [{ name: "box__write_file", arguments: { path: "later.txt", content: "x" } }] },
      { text: "waiting for approval" },
      { toolCalls: [{ name: "box__postpone", arguments: {} }] },
      { text: "postponed" },
    ]);
    const id = await machineOf(A, conversation);
    // Settled, but a hold is open: the machine stays, and its lease keeps the alarm for its warning.
    await fireAlarm(T, A).catch(() => false);
    expect(await host().status(id)).toBeDefined();
    const open = (await leaseOf(A, conversation))!;
    expect(open).toMatchObject({ state: "open", warned: 0, postponed: 0, idle_ms: 30 * 60_000 });
    expect(await alarmOf(T, A)).toBe(open.expires_at - IDLE_WARNING_MS);
    // status lists it.
    const status = await agent(T, A).submit({ tenant: T, agent: A }, { id: unique("ev"), kind: "command", command: "status", conversation, user: REQUESTER });
    expect(status.notice).toContain("\nOpen machines: box of this conversation (30 min left without a call).");

    // The test clock: the limit is 5 minutes and a little away, then just under 5 minutes: only then is the model warned.
    await rows(T, A, "UPDATE leases SET expires_at = ? WHERE conversation = ?", Date.now() + IDLE_WARNING_MS + 60_000, conversation);
    await fireAlarm(T, A);
    expect((await leaseOf(A, conversation))!.warned).toBe(0);
    await rows(T, A, "UPDATE leases SET expires_at = ? WHERE conversation = ?", Date.now() + IDLE_WARNING_MS - 1000, conversation);
    await fireAlarm(T, A);
    const warned = (await leaseOf(A, conversation))!;
    expect(warned.warned).toBe(1);
    expect(await alarmOf(T, A)).toBe(warned.expires_at);

    // The warning reaches the model at its next step; it postpones.
    await postMessage(T, A, { text: `[s:${s}] still there?`, conversation });
    await answered(T, A, conversation, "postponed");
    const asked = JSON.stringify((await providerRequests(s)).at(-2)!.body.messages);
    expect(asked).toContain('Machine \\"box\\" has had no call for a while: it will be destroyed in 5 minutes');
    expect(asked).toContain("Call box__postpone to keep it 30 minutes longer (once)");
    const postponed = (await leaseOf(A, conversation))!;
    expect(postponed).toMatchObject({ state: "open", postponed: 1, warned: 0, expires_at: warned.expires_at + 30 * 60_000 });
    expect(await host().status(id)).toBeDefined();

    // At the limit it is destroyed, open hold or not, and the agent arms nothing.
    await rows(T, A, "UPDATE leases SET expires_at = ? WHERE conversation = ?", Date.now() - 1, conversation);
    await fireAlarm(T, A);
    await gone(id, "813.5");
    await waitFor("the lease to be closed", async () => (await leaseOf(A, conversation)) === undefined);
    await waitFor("the agent to have nothing armed", async () => (await alarmOf(T, A)) === null);
  });
});

describe("machine time in the ledger", () => {
  const PRICES = { vcpuHour: 36, memoryGiBHour: 72, diskGiBHour: 0 };
  /** What MACHINE_PRICES makes of a machine of boxMount()'s size (1 vCPU, 512 MiB) held `seconds`. */
  const priced = (seconds: number) => (seconds / 3600) * (1 * PRICES.vcpuHour + 0.5 * PRICES.memoryGiBHour);

  interface Usage {
    totals: { costUsd: number; machines: number; machineSeconds: number; machineCostUsd: number };
    machines: { agent: string; size: string; machines: number; seconds: number; costUsd: number }[];
    today: { spentUsd: number };
  }
  async function usageOf(tenant: string): Promise<Usage> {
    const res = await worker(`/v1/tenants/${tenant}/usage`, { headers: ADMIN });
    expect(res.status).toBe(200);
    return res.json();
  }

  async function mountFor(tenant: string, name: string): Promise<void> {
    const res = await worker(`/v1/tenants/${tenant}/agents/${name}/mounts`, { method: "PUT", headers: ADMIN, body: JSON.stringify([boxMount({}, { policy: { tools: { exec: "allow" } } })]) });
    expect(res.status, await res.clone().text()).toBe(200);
  }

  it("a machine released after a measured span is in /v1 usage and the console with that span, priced by MACHINE_PRICES, and counts toward the daily limit", async () => {
    const tenant = unique("machine-time");
    const A = "timed";
    await mountFor(tenant, A);
    const s = unique("box");
    const conversation = unique("c");
    await script(s, [{ toolCalls: [{ name: "box__exec", arguments: { command: "true" } }] }, { hold: true, toolCalls: [{ name: "box__release", arguments: {} }] }, { text: "released" }]);
    await withVars({ MACHINE_PRICES: JSON.stringify(PRICES) }, async () => {
      const asked = Date.now();
      await postMessage(tenant, A, { text: `[s:${s}] go`, conversation });
      // The machine is started by the exec, before the second model call arrives: its span starts after `asked` and ends after `released`.
      await waitFor("the model call after the exec", async () => (await providerRequests(s)).length === 2);
      const held = Date.now();
      await new Promise((resolve) => setTimeout(resolve, 6_000));
      const released = Date.now();
      await releaseProvider(s);
      await answered(tenant, A, conversation, "released");
      const ended = Date.now();
      const usage = await waitFor("the machine to be counted", async () => {
        const u = await usageOf(tenant);
        return u.totals.machines === 1 && u;
      });
      const [row] = usage.machines;
      expect(row).toMatchObject({ agent: A, size: "1 vCPU, 512 MiB, 64 MiB disk", machines: 1 });
      expect(row!.seconds).toBeGreaterThanOrEqual((released - held) / 1000);
      expect(row!.seconds).toBeLessThanOrEqual((ended - asked) / 1000);
      expect(usage.totals.machineCostUsd).toBeCloseTo(priced(row!.seconds), 6);
      // Today's spend, which the limit is checked against, holds the machine as well as the model calls.
      expect(usage.today.spentUsd).toBeCloseTo(usage.totals.costUsd + usage.totals.machineCostUsd, 6);
      const page = await (await worker(`/console/tenants/${tenant}`, { headers: { cookie: await consoleCookie() } })).text();
      expect(page).toContain("<th class=\"num\">Machines</th>");
      expect(page).toContain("Machine time per day");
      expect(page).toMatch(new RegExp(`${Math.round(row!.seconds)} s, \\$${usage.totals.machineCostUsd.toFixed(2)}`));

      // A limit between the model calls' cost and the spend with the machine: only the machine's cost can reach it.
      const limit = usage.totals.costUsd + usage.totals.machineCostUsd / 2;
      expect((await worker(`/v1/tenants/${tenant}/limits`, { method: "PUT", headers: ADMIN, body: JSON.stringify({ dailyUsd: limit }) })).status).toBe(200);
      const after = unique("c");
      await postMessage(tenant, A, { text: `[s:${s}] more`, conversation: after });
      const refused = await settled(tenant, A, after);
      expect(refused.error).toMatch(/^Daily usage limit reached/);
    });
  });

  it("a machine whose agent never wakes again is counted to its destruction by the lease, unpriced without MACHINE_PRICES", async () => {
    const tenant = unique("machine-lease");
    const A = "leased";
    await mountFor(tenant, A);
    const started = Date.now();
    const { conversation } = await (async () => {
      const s = unique("box");
      const c = unique("c");
      await script(s, [{ toolCalls: [{ name: "box__exec", arguments: { command: "sleep 2" } }] }, { text: "done" }]);
      await postMessage(tenant, A, { text: `[s:${s}] go`, conversation: c });
      await settled(tenant, A, c);
      return { conversation: c };
    })();
    const id = await machineId({ tenant, agent: A, alias: "box", conversation });
    // No event comes again: the pass that settled the turn ends the lease, and the courier destroys the machine.
    await waitFor("the machine to be destroyed", async () => (await host().status(id)) === undefined);
    const destroyed = Date.now();
    const usage = await waitFor("the machine to be counted", async () => {
      const u = await usageOf(tenant);
      return u.totals.machines === 1 && u;
    });
    expect(usage.machines[0]!.seconds).toBeGreaterThanOrEqual(2);
    expect(usage.machines[0]!.seconds).toBeLessThanOrEqual((destroyed - started) / 1000);
    expect(usage.totals.machineCostUsd).toBe(0);
  });
});

describe("MACHINE_IDLE_MINUTES", () => {
  it("a bad value fails the turns of an agent with a machine mount, naming the variable; an agent without one is not concerned", async () => {
    await mount("badidle", [boxMount({}, { policy: { tools: { exec: "allow" } } })]);
    await mount("noidle", [{ alias: "clock", plugin: "clock" }]);
    const [withMachine, without] = await withVars({ MACHINE_IDLE_MINUTES: "soon" }, () =>
      Promise.all([turn("badidle", [{ toolCalls: [{ name: "box__exec", arguments: { command: "true" } }] }, { text: "ran" }]), turn("noidle", [{ text: "fine" }])]),
    );
    expect(withMachine.view).toMatchObject({ status: "failed", error: "configuration error: MACHINE_IDLE_MINUTES is not valid JSON" });
    expect(without.view).toMatchObject({ status: "idle" });
  });
});

describe("a secret a command needs (canary)", () => {
  it("reaches a command's environment in each call (machined itself never holds it), and never the transcript, the tool results, the model, the tables or the logs", async () => {
    const A = "keyed";
    const CANARY = E.REMOTE_API_TOKEN!;
    const forms = [CANARY, JSON.stringify(CANARY).slice(1, -1), btoa(CANARY)];
    const lines = captureConsole();
    const logBefore = (await hostWindow<string[]>("/log")).length;
    await mount(A, [boxMount({ secretEnv: "API_TOKEN" }, { secret_ref: "REMOTE_API_TOKEN", policy: { tools: { exec: "allow" } } })]);
    const { view, s, conversation } = await turn(A, [
      { toolCalls: [{ name: "box__exec", arguments: { command: `printf 'length %s\\n' "\${#API_TOKEN}"; printf '%s\\n' "$API_TOKEN"; printf %s "$API_TOKEN" | base64 -w0; echo; printf %s "$API_TOKEN" > token.txt` } }] },
      { toolCalls: [{ name: "box__read_file", arguments: { path: "token.txt" } }, { name: "box__exec", arguments: { command: "tr '\\0' ' ' < /proc/$PPID/cmdline; echo; tr '\\0' '\\n' < /proc/$PPID/environ | grep -c API_TOKEN; true" } }] },
      { echoToolResults: true },
    ]);
    const [exec, read, later] = toolResults(view);
    // The command had it: its length is the canary's.
    expect(exec!.text).toContain(`length ${CANARY.length}`);
    expect(exec!.text).toContain("[redacted]\n[redacted]");
    expect(read!.text).toBe("[redacted]");
    // The machine does not hold it: machined, which runs every command, has no such variable (each call passes it anew).
    expect(later!.text).toMatch(/stdout:\n\/opt\/machine\/node \/opt\/machine\/machined\.mjs \n0\n/);

    const found = (text: string) => forms.filter((f) => text.includes(f));
    const hostLog = (await hostWindow<string[]>("/log")).slice(logBefore).join("\n");
    expect({
      transcript: found(JSON.stringify(await getConversation(T, A, conversation))),
      toolResults: found(JSON.stringify(toolResults(view))),
      modelRequests: found(JSON.stringify(await providerRequests(s))),
      tables: found(await storedText(T, A)),
      workerLog: found(lines.join("\n")),
      hostLog: found(hostLog),
    }).toEqual({ transcript: [], toolResults: [], modelRequests: [], tables: [], workerLog: [], hostLog: [] });
    expect(hostLog).toContain("started"); // the host's log is real: it logged this machine
    await host().destroy(await machineOf(A, conversation));
  });
});

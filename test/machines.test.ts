// The machine backends' contract: one suite, run against the local backend
// (the real machine host, each machine a bubblewrap sandbox) and the
// Cloudflare backend (the real Machine object and @cloudflare/containers in
// workerd, on a fake of the platform's container runtime). Then what only
// one backend can show: the local sandbox's isolation and limits, and the
// options the Cloudflare backend starts a container with.
import { env } from "cloudflare:workers";
import { beforeAll, describe, expect, it } from "vitest";
import { ContainerBackend, HostBackend, MachineError, type MachineBackend, type MachineLabels, type MachineSpec } from "../machines/index.ts";
import { unique } from "./support.ts";

const E = env as unknown as Record<string, string>;
const SPEC: MachineSpec = { profile: "default", cpu: 1, memoryMiB: 512, diskMiB: 64, processes: 128, allowedHosts: [] };
const enc = (text: string) => new TextEncoder().encode(text);
const dec = (bytes: Uint8Array) => new TextDecoder().decode(bytes);

function labels(): MachineLabels {
  return { tenant: "machines", agent: "contract", alias: "box", conversation: unique("c") };
}

/** A fresh machine id, as the plugin makes them (lower-case letters, digits and -). */
function newId(): string {
  return unique("m-").toLowerCase();
}

function hostBackend(): HostBackend {
  if (E.MACHINE_HOST_MISSING) throw new Error(`the local machine backend cannot run here: ${E.MACHINE_HOST_MISSING}`);
  return new HostBackend(E.MACHINE_HOST_URL!, E.MACHINE_HOST_TOKEN!);
}

async function failure(promise: Promise<unknown>): Promise<MachineError> {
  const err = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  if (!(err instanceof MachineError)) throw new Error(`expected a MachineError, got ${String(err)}`);
  return err;
}

const run = (backend: MachineBackend, id: string, command: string, more: { cwd?: string; env?: Record<string, string>; timeoutMs?: number; maxOutputBytes?: number } = {}) =>
  backend.exec(id, { command, cwd: more.cwd, env: more.env ?? {}, timeoutMs: more.timeoutMs ?? 10_000, maxOutputBytes: more.maxOutputBytes ?? 10_000 });

const backends: [string, () => MachineBackend][] = [
  ["local (bubblewrap on the machine host)", hostBackend],
  ["Cloudflare (the Machine object on a fake container runtime)", () => new ContainerBackend(env.MACHINE)],
];

describe.each(backends)("the machine backend contract: %s", (_name, make) => {
  let backend: MachineBackend;
  beforeAll(() => {
    backend = make();
  });

  it("starts a machine once: a second ensure with the same spec finds it, and status has its labels and times", async () => {
    const id = newId();
    const who = labels();
    const first = await backend.ensure(id, SPEC, who);
    expect(first.created).toBe(true);
    expect(first.machine).toMatchObject({ labels: who, spec: SPEC });
    const again = await backend.ensure(id, SPEC, who);
    expect(again.created).toBe(false);
    const before = await backend.status(id);
    expect(before).toMatchObject({ labels: who, spec: SPEC, createdAt: first.machine.createdAt });
    await new Promise((r) => setTimeout(r, 20));
    await run(backend, id, "true");
    const after = await backend.status(id);
    expect(Date.parse(after!.lastUsedAt)).toBeGreaterThan(Date.parse(before!.lastUsedAt));
    await backend.destroy(id);
  });

  it("runs sh -c in the workspace with the call's environment and working folder, and tells the exit code and both streams", async () => {
    const id = newId();
    await backend.ensure(id, SPEC, labels());
    await backend.writeFile(id, "sub/notes.txt", enc("alpha\nbeta\n"), false);
    const ok = await run(backend, id, 'pwd; tr a-z A-Z < notes.txt; echo "$GREETING" >&2', { cwd: "sub", env: { GREETING: "hi there" } });
    expect(ok).toMatchObject({ exitCode: 0, timedOut: false, stdout: { head: expect.stringMatching(/\/workspace\/sub\nALPHA\nBETA\n$/), omitted: 0 }, stderr: { head: "hi there\n" } });
    const failed = await run(backend, id, "echo nope >&2; exit 3");
    expect(failed).toMatchObject({ exitCode: 3, stderr: { head: "nope\n" } });
    await backend.destroy(id);
  });

  it("keeps the first and last part of a long output and counts what it dropped", async () => {
    const id = newId();
    await backend.ensure(id, SPEC, labels());
    // 200,000 bytes: "0123456789" 20,000 times, then END.
    const result = await run(backend, id, "i=0; while [ $i -lt 20000 ]; do printf 0123456789; i=$((i+1)); done; printf END", { maxOutputBytes: 1000 });
    expect(result.stdout.head).toBe("0123456789".repeat(50));
    expect(result.stdout.tail).toBe(`${"0123456789".repeat(50).slice(3)}END`);
    expect(result.stdout.omitted).toBe(200_003 - 1000);
    await backend.destroy(id);
  });

  it("kills a command at its timeout, with what it started in the background", async () => {
    const id = newId();
    await backend.ensure(id, SPEC, labels());
    const started = Date.now();
    const result = await run(backend, id, "(sleep 30; echo late > late.txt) & echo started; sleep 30", { timeoutMs: 500 });
    expect(result).toMatchObject({ timedOut: true, stdout: { head: "started\n" } });
    expect(Date.now() - started).toBeLessThan(5_000);
    // Nothing of it is left to finish later: its process group was killed.
    expect((await run(backend, id, "sleep 1; ls late.txt 2>/dev/null || echo none")).stdout.head).toBe("none\n");
    await backend.destroy(id);
  });

  it("writes, appends, reads (a part of) and lists files; a missing file or a folder is refused as such", async () => {
    const id = newId();
    await backend.ensure(id, SPEC, labels());
    expect(await backend.writeFile(id, "a/b/c.txt", enc("hello "), false)).toEqual({ path: "/workspace/a/b/c.txt", size: 6 });
    expect(await backend.writeFile(id, "/workspace/a/b/c.txt", enc("world"), true)).toEqual({ path: "/workspace/a/b/c.txt", size: 11 });
    const whole = await backend.readFile(id, "a/b/c.txt", 0, 1000);
    expect([whole.size, dec(whole.bytes)]).toEqual([11, "hello world"]);
    const part = await backend.readFile(id, "a/b/c.txt", 6, 3);
    expect([part.size, dec(part.bytes)]).toEqual([11, "wor"]);
    const listing = await backend.list(id, "a");
    expect(listing).toMatchObject({ path: "/workspace/a", entries: [{ name: "b", type: "folder" }], more: 0 });
    expect((await backend.list(id, "a/b")).entries).toEqual([expect.objectContaining({ name: "c.txt", type: "file", size: 11 })]);
    expect((await failure(backend.readFile(id, "nope.txt", 0, 10))).kind).toBe("missing");
    expect((await failure(backend.readFile(id, "a", 0, 10))).kind).toBe("refused");
    expect((await failure(backend.list(id, "nope"))).kind).toBe("missing");
    await backend.destroy(id);
  });

  it("destroys a machine: gone from status, its files with it; destroying again is answered, not failed; the next ensure starts an empty one", async () => {
    const id = newId();
    const who = labels();
    await backend.ensure(id, SPEC, who);
    await backend.writeFile(id, "kept.txt", enc("x"), false);
    expect(await backend.destroy(id)).toEqual({ destroyed: true });
    expect(await backend.status(id)).toBeUndefined();
    expect((await failure(run(backend, id, "true"))).kind).toBe("missing");
    expect(await backend.destroy(id)).toEqual({ destroyed: false });
    expect((await backend.ensure(id, SPEC, who)).created).toBe(true);
    expect((await backend.list(id, ".")).entries.map((e) => e.name)).not.toContain("kept.txt");
    await backend.destroy(id);
  });

  it("a machine asked for with another spec is replaced by a new one", async () => {
    const id = newId();
    const who = labels();
    await backend.ensure(id, SPEC, who);
    await backend.writeFile(id, "old.txt", enc("x"), false);
    const bigger = { ...SPEC, diskMiB: 128 };
    const replaced = await backend.ensure(id, bigger, who);
    expect(replaced).toMatchObject({ created: true, machine: { spec: bigger } });
    expect((await backend.list(id, ".")).entries.map((e) => e.name)).not.toContain("old.txt");
    await backend.destroy(id);
  });

  it("refuses a profile it does not have", async () => {
    const err = await failure(backend.ensure(newId(), { ...SPEC, profile: "gpu-xl" }, labels()));
    expect(err.kind).toBe("refused");
    expect(err.message).toContain('profile "gpu-xl"');
  });
});

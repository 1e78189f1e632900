// The machine backends' contract: one suite, run against the local backend
// (the real machine host, each machine a bubblewrap sandbox) and the
// Cloudflare backend (the real Machine object and @cloudflare/containers in
// workerd, on a fake of the platform's container runtime). Then what only
// one backend can show: the local sandbox's isolation and limits, and the
// options the Cloudflare backend starts a container with.
import { env } from "cloudflare:workers";
import { beforeAll, describe, expect, it } from "vitest";
import { ContainerBackend, HostBackend, MachineError, type MachineBackend, type MachineLabels, type MachineSpec } from "../../machines/index.ts";
import { unique } from "../support.ts";

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
    const result = await run(backend, id, "(sleep 2; echo late > late.txt) & echo started; sleep 30", { timeoutMs: 500 });
    expect(result).toMatchObject({ timedOut: true, stdout: { head: "started\n" } });
    expect(Date.now() - started).toBeLessThan(5_000);
    // Nothing of it is left to finish later: its whole process group was killed.
    expect((await run(backend, id, "sleep 3; ls late.txt 2>/dev/null || echo none")).stdout.head).toBe("none\n");
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

  it("archives the named workspace folders that exist and restores them into another machine", async () => {
    const [a, b] = [newId(), newId()];
    await backend.ensure(a, SPEC, labels());
    await backend.writeFile(a, "cache/deep/data.txt", enc("keep me"), false);
    await backend.writeFile(a, "scratch.txt", enc("lose me"), false);
    expect(await backend.archive(a, ["nothing-here"])).toBeUndefined();
    const archive = await backend.archive(a, ["cache", "nothing-here"]);
    expect(archive!.byteLength).toBeGreaterThan(0);
    await backend.ensure(b, SPEC, labels());
    await backend.restore(b, archive!);
    expect(dec((await backend.readFile(b, "cache/deep/data.txt", 0, 100)).bytes)).toBe("keep me");
    expect((await backend.list(b, ".")).entries.map((e) => e.name)).not.toContain("scratch.txt");
    expect((await failure(backend.archive(a, ["../etc"]))).kind).toBe("refused");
    await Promise.all([backend.destroy(a), backend.destroy(b)]);
  });

  it("concurrent first calls for one machine start one machine", async () => {
    const id = newId();
    const who = labels();
    const all = await Promise.all([1, 2, 3, 4].map(() => backend.ensure(id, SPEC, who)));
    expect(all.filter((r) => r.created)).toHaveLength(1);
    expect(new Set(all.map((r) => r.machine.createdAt)).size).toBe(1);
    await backend.destroy(id);
  });

  it("refuses a profile it does not have", async () => {
    const err = await failure(backend.ensure(newId(), { ...SPEC, profile: "gpu-xl" }, labels()));
    expect(err.kind).toBe("refused");
    expect(err.message).toContain('profile "gpu-xl"');
  });
});

/** The host's window onto itself (test/machines/host.mjs). */
async function hostWindow<T>(path: string): Promise<T> {
  return (await fetch(`${E.MACHINE_HOST_WINDOW_URL}${path}`)).json() as Promise<T>;
}

describe("the local backend's sandbox", () => {
  let backend: HostBackend;
  beforeAll(() => {
    backend = hostBackend();
  });

  it("shows a machine its workspace and the system read-only, as an unprivileged user with no capabilities: no host secret, no other machine", async () => {
    const [a, b] = [newId(), newId()];
    await backend.ensure(a, SPEC, labels());
    await backend.ensure(b, SPEC, labels());
    await backend.writeFile(a, "mine.txt", enc("only a's"), false);
    const seen = await run(backend, b, "id -u; grep CapEff /proc/self/status; ls /; touch /usr/x 2>&1; cat /etc/shadow 2>&1; ls /root 2>&1; find / -path /proc -prune -o -path /usr -prune -o -name mine.txt -print 2>/dev/null | wc -l; ls /run/machine");
    const out = seen.stdout.head;
    expect(out).toMatch(/^1000\nCapEff:\t0000000000000000\n/);
    expect(out).toContain("touch: cannot touch '/usr/x': Read-only file system");
    expect(out).toContain("/etc/shadow: No such file or directory");
    expect(out).toContain("cannot access '/root': No such file or directory");
    // Its own socket only; a's file is nowhere in b.
    expect(out).toMatch(/\n0\nmachined\.sock\n$/);
    await Promise.all([backend.destroy(a), backend.destroy(b)]);
  });

  it("enforces the disk (the workspace's size) and each command's memory", async () => {
    const id = newId();
    await backend.ensure(id, { ...SPEC, diskMiB: 32, memoryMiB: 256 }, labels());
    const disk = await run(backend, id, "dd if=/dev/zero of=big bs=1M count=64");
    expect(disk.exitCode).not.toBe(0);
    expect(disk.stderr.head).toContain("No space left on device");
    const memory = await run(backend, id, "python3 -c 'x = bytearray(400 * 1024 * 1024); print(\"allocated\")'");
    expect(memory.exitCode).not.toBe(0);
    expect(memory.stdout.head).not.toContain("allocated");
    expect(memory.stderr.head).toContain("MemoryError");
    await backend.destroy(id);
  });

  it("with a cgroup, limits the machine's processes and CPU as a whole", async ({ skip }) => {
    const health = (await (await fetch(`${E.MACHINE_HOST_URL}/health`, { headers: { authorization: `Bearer ${E.MACHINE_HOST_TOKEN}` } })).json()) as { limits: { cgroups: string; cgroupsUnavailable?: string } };
    if (health.limits.cgroups === "none") skip(`this host has no cgroups: ${health.limits.cgroupsUnavailable}`);
    const id = newId();
    await backend.ensure(id, { ...SPEC, processes: 16, cpu: 0.25 }, labels());
    const forks = await run(backend, id, "for i in $(seq 40); do sleep 2 & done 2>&1; wait; echo done");
    expect(forks.stderr.head + forks.stdout.head).toMatch(/fork|Resource temporarily unavailable/i);
    // Two seconds of a busy loop get about a quarter of a core.
    const busy = await run(backend, id, "node -e 'const s = Date.now(); while (Date.now() - s < 2000); console.log(Math.round(process.cpuUsage().user / 1000))'");
    expect(Number(busy.stdout.head.trim())).toBeLessThan(800);
    await backend.destroy(id);
  });

  it("a machine whose daemon is killed from inside is gone, cleaned up, and the next call starts a new one", async () => {
    const id = newId();
    const who = labels();
    await backend.ensure(id, SPEC, who);
    await run(backend, id, "(sleep 0.2; kill -9 $PPID) >/dev/null 2>&1 &").catch(() => undefined);
    await waitUntil(async () => (await backend.status(id)) === undefined);
    await waitUntil(async () => !(await hostWindow<{ exists: boolean }>(`/folder?id=${id}`)).exists);
    expect((await backend.ensure(id, SPEC, who)).created).toBe(true);
    await backend.destroy(id);
  });

  it("cannot write outside its workspace: its socket cannot be replaced and the host's disk cannot be filled", async () => {
    const id = newId();
    await backend.ensure(id, SPEC, labels());
    const tried = await run(backend, id, "rm -f /run/machine/machined.sock; ln -s /elsewhere /run/machine/other.sock; echo x > /run/machine/fill; ls /run/machine");
    expect(tried.stderr.head).toMatch(/rm: cannot remove '\/run\/machine\/machined\.sock': Read-only file system/);
    expect(tried.stderr.head).toContain("Read-only file system");
    expect(tried.stdout.head).toBe("machined.sock\n");
    // Still its own machined that answers.
    expect((await run(backend, id, "echo still here")).stdout.head).toBe("still here\n");
    await backend.destroy(id);
  });

  it("answers only requests that carry its token", async () => {
    const res = await fetch(`${E.MACHINE_HOST_URL}/machines`, { headers: { authorization: "Bearer not-the-token" } });
    expect(res.status).toBe(401);
    const wrong = new HostBackend(E.MACHINE_HOST_URL!, "not-the-token");
    expect((await failure(wrong.ensure(newId(), SPEC, labels()))).message).toContain("MACHINE_HOST_TOKEN");
  });
});

async function waitUntil(check: () => Promise<boolean>): Promise<void> {
  for (let i = 0; !(await check()); i++) {
    if (i > 200) throw new Error("timed out");
    await new Promise((r) => setTimeout(r, 25));
  }
}

describe("the Cloudflare backend's container", () => {
  const runtime = (id: string) => fetch(`${E.FAKE_CONTAINERS_URL}/containers/${id}`).then((r) => r.json() as Promise<{ running: boolean; starts: { entrypoint: string[]; enableInternet: boolean; env: Record<string, string> }[]; intercepts: { kind: string; host: string }[] }>);
  const objectId = (id: string) => env.MACHINE.idFromName(id).toString();

  it("starts machined in the image with no internet, the memory limit and Cloudflare's CA trusted, and is gone when destroyed", async () => {
    const backend = new ContainerBackend(env.MACHINE);
    const id = newId();
    await backend.ensure(id, { ...SPEC, memoryMiB: 300 }, labels());
    const seen = await runtime(objectId(id));
    expect(seen.running).toBe(true);
    expect(seen.starts).toHaveLength(1);
    const [start] = seen.starts;
    expect(start!.enableInternet).toBe(false);
    expect(start!.entrypoint.slice(0, 3)).toEqual(["node", "--input-type=module", "-e"]);
    expect(start!.entrypoint[3]).toContain("machined: the daemon inside every machine");
    expect(start!.env).toMatchObject({ MACHINED_PORT: "8080", MACHINED_WORKSPACE: "/workspace", MACHINED_MEMORY_BYTES: String(300 * 1024 * 1024) });
    // No allowed hosts: every http and https request is intercepted, and the object's proxy denies it.
    expect(seen.intercepts).toEqual(expect.arrayContaining([{ kind: "http", host: "*" }, { kind: "https", host: "*" }]));
    const trusted = await run(backend, id, 'tail -2 "$SSL_CERT_FILE"; echo "$NODE_EXTRA_CA_CERTS"');
    expect(trusted.stdout.head).toBe("fake-cloudflare-containers-ca\n-----END CERTIFICATE-----\n/etc/cloudflare/certs/cloudflare-containers-ca.crt\n");
    await backend.destroy(id);
    expect((await runtime(objectId(id))).running).toBe(false);
  });
});

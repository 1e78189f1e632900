// The machine host: workerd cannot start processes, so the Worker reaches
// machines through this small Node program over HTTP on loopback, as it would
// a container's port. Each machine is machined in a bubblewrap sandbox
// (sandbox.mjs); the host starts, lists, forwards to and destroys them, and
// answers only requests that carry MACHINE_HOST_TOKEN.
//
//   node machines/host/host.mjs           serve (MACHINE_HOST_PORT, default 8789)
//   node machines/host/host.mjs --check   exit 0 if a machine works here end to end (started, a file written
//                                         and read back by a command, destroyed, over HTTP on loopback as
//                                         the Worker asks), else say why (exit 1)
//   --exit-with-stdin                     destroy every machine and exit when stdin ends (the parent that
//                                         started it is gone, however it ended: npm start, the tests)
//
// API (JSON; every route needs `Authorization: Bearer <MACHINE_HOST_TOKEN>`):
//   GET    /health                   the host: bubblewrap, limits it enforces, profiles, machine count
//   GET    /machines                 live machines, with labels, spec, createdAt and lastUsedAt
//   PUT    /machines/:id             { spec, labels } → start it, or find it running (201 / 200; 409 if its spec differs)
//   GET    /machines/:id             one machine (404 when there is none)
//   DELETE /machines/:id             destroy it: processes killed, folder removed (idempotent: { destroyed: false } when absent)
//   POST   /machines/:id/exec        forwarded to machined, as are
//   GET|PUT /machines/:id/file, GET /machines/:id/list, POST /machines/:id/archive|restore
import { randomBytes, timingSafeEqual } from "node:crypto";
import { createServer, request } from "node:http";
import { rmSync } from "node:fs";
import { join, resolve } from "node:path";
import { z } from "zod";
import { readSettings, runConnector } from "../../bridges/shared/connector.mjs";
import { detectCgroups } from "./cgroups.mjs";
import { probeBubblewrap, startSandbox, stopSandbox } from "./sandbox.mjs";

const ID = /^[a-z0-9][a-z0-9-]{0,62}$/;
const PROFILES = ["default"];
const MAX_JSON_BYTES = 64 * 1024;

const specSchema = z.object({
  profile: z.string(),
  cpu: z.number().positive().max(64),
  memoryMiB: z.number().int().min(64).max(1024 * 1024),
  diskMiB: z.number().int().min(16).max(1024 * 1024),
  processes: z.number().int().min(8).max(100_000),
  allowedHosts: z.array(z.string().min(1).max(253)).max(100),
});
const ensureSchema = z.object({ spec: specSchema, labels: z.record(z.string(), z.string().max(500)).default({}) });

class HostError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

function sendJson(res, status, body) {
  const text = JSON.stringify(body);
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text) });
  res.end(text);
}

async function readJson(req) {
  const chunks = [];
  let size = 0;
  for await (const chunk of req) {
    size += chunk.length;
    if (size > MAX_JSON_BYTES) throw new HostError(413, `the body is over ${MAX_JSON_BYTES} bytes`);
    chunks.push(chunk);
  }
  try {
    return JSON.parse(Buffer.concat(chunks).toString("utf8"));
  } catch {
    throw new HostError(400, "the body is not JSON");
  }
}

function authorized(req, token) {
  const given = Buffer.from(req.headers.authorization ?? "");
  const wanted = Buffer.from(`Bearer ${token}`);
  return given.length === wanted.length && timingSafeEqual(given, wanted);
}

export class MachineHost {
  /** id → { id, labels, spec, createdAt, lastUsedAt, parts, busy } */
  machines = new Map();
  /** id → the start or destroy under way, so concurrent calls for one id wait for it. */
  pending = new Map();

  constructor({ root, cgroups, bubblewrap, log = console.log }) {
    this.root = root;
    this.cgroups = cgroups;
    this.bubblewrap = bubblewrap;
    this.log = log;
  }

  view(m) {
    return { id: m.id, labels: m.labels, spec: m.spec, createdAt: new Date(m.createdAt).toISOString(), lastUsedAt: new Date(m.lastUsedAt).toISOString(), busy: m.busy > 0 };
  }

  health() {
    return {
      ok: true,
      backend: "bubblewrap",
      bubblewrap: this.bubblewrap,
      limits: { cgroups: this.cgroups.kind, ...(this.cgroups.reason ? { cgroupsUnavailable: this.cgroups.reason } : {}), prlimit: ["nofile", "core", "data per command"], disk: "tmpfs size" },
      profiles: PROFILES,
      machines: this.machines.size,
    };
  }

  /** One operation on `id` at a time for starts and destroys. */
  async serialized(id, work) {
    while (this.pending.has(id)) await this.pending.get(id).catch(() => undefined);
    const done = work();
    this.pending.set(id, done);
    try {
      return await done;
    } finally {
      this.pending.delete(id);
    }
  }

  ensure(id, body) {
    const parsed = ensureSchema.safeParse(body);
    if (!parsed.success) throw new HostError(422, z.prettifyError(parsed.error));
    const { spec, labels } = parsed.data;
    if (!PROFILES.includes(spec.profile)) throw new HostError(422, `profile "${spec.profile}" is not one this host has (${PROFILES.join(", ")})`);
    return this.serialized(id, async () => {
      const found = this.machines.get(id);
      if (found) {
        if (JSON.stringify(found.spec) !== JSON.stringify(spec)) throw new HostError(409, `machine ${id} runs with another spec; destroy it first`);
        found.lastUsedAt = Date.now();
        return { status: 200, machine: this.view(found) };
      }
      const machine = { id, labels, spec, createdAt: Date.now(), lastUsedAt: Date.now(), busy: 0, parts: undefined };
      machine.parts = await startSandbox({
        id,
        folder: join(this.root, id),
        spec,
        cgroups: this.cgroups,
        onExit: (how) => this.exited(machine, how),
      }).catch((err) => {
        throw new HostError(503, `machine ${id} could not start: ${err.message}`);
      });
      this.machines.set(id, machine);
      this.log(`machine ${id} started (${spec.cpu} CPU, ${spec.memoryMiB} MiB memory, ${spec.diskMiB} MiB disk, network: ${spec.allowedHosts.length ? spec.allowedHosts.join(", ") : "none"})`);
      return { status: 201, machine: this.view(machine) };
    });
  }

  /** Its sandbox ended without a destroy (machined was killed from inside, or ran out of memory): cleaned up, and gone. */
  exited(machine, how) {
    if (this.machines.get(machine.id) !== machine) return;
    this.machines.delete(machine.id);
    this.log(`machine ${machine.id} stopped by itself (${how.signal ?? `exit ${how.code}`}); removed`);
    this.serialized(machine.id, () => stopSandbox(machine.parts)).catch((err) => this.log(`machine ${machine.id}: cleaning up failed: ${err.message}`));
  }

  destroy(id) {
    return this.serialized(id, async () => {
      const machine = this.machines.get(id);
      if (!machine) return { destroyed: false };
      this.machines.delete(id);
      await stopSandbox(machine.parts);
      this.log(`machine ${id} destroyed`);
      return { destroyed: true };
    });
  }

  async destroyAll() {
    await Promise.all([...this.machines.keys()].map((id) => this.destroy(id)));
  }

  /** Hands the request to the machine's machined, as it came; the answer streams back. */
  forward(machine, req, res, path) {
    machine.busy++;
    machine.lastUsedAt = Date.now();
    const headers = {};
    for (const name of ["content-type", "content-length"]) if (req.headers[name]) headers[name] = req.headers[name];
    const upstream = request({ socketPath: machine.parts.socketPath, method: req.method, path, headers }, (answer) => {
      const passed = {};
      for (const name of ["content-type", "content-length", "x-file-size"]) if (answer.headers[name]) passed[name] = answer.headers[name];
      res.writeHead(answer.statusCode ?? 502, passed);
      answer.pipe(res);
    });
    const finish = () => {
      machine.busy = Math.max(0, machine.busy - 1);
      machine.lastUsedAt = Date.now();
    };
    res.on("close", () => {
      // The caller went away: machined sees its request end and stops the command.
      if (!res.writableFinished) upstream.destroy();
      finish();
    });
    upstream.on("error", (err) => {
      if (res.headersSent) return res.destroy();
      sendJson(res, 503, { error: `machine ${machine.id} did not answer: ${err.message}` });
    });
    req.pipe(upstream);
  }

  async route(req, res) {
    const url = new URL(req.url ?? "/", "http://host");
    const parts = url.pathname.split("/").filter(Boolean);
    const method = req.method;
    if (method === "GET" && url.pathname === "/health") return sendJson(res, 200, this.health());
    if (parts[0] !== "machines") throw new HostError(404, `no route ${method} ${url.pathname}`);
    if (parts.length === 1 && method === "GET") return sendJson(res, 200, { machines: [...this.machines.values()].map((m) => this.view(m)) });
    const id = parts[1];
    if (!ID.test(id)) throw new HostError(400, "a machine id is 1 to 63 lower-case letters, digits and -");
    if (parts.length === 2) {
      if (method === "PUT") {
        const { status, machine } = await this.ensure(id, await readJson(req));
        return sendJson(res, status, machine);
      }
      if (method === "GET") {
        const machine = this.machines.get(id);
        if (!machine) throw new HostError(404, `no machine ${id}`);
        return sendJson(res, 200, this.view(machine));
      }
      if (method === "DELETE") return sendJson(res, 200, await this.destroy(id));
    }
    if (parts.length === 3) {
      const op = `${method} ${parts[2]}`;
      if (["POST exec", "GET file", "PUT file", "GET list", "POST archive", "POST restore"].includes(op)) {
        const machine = this.machines.get(id);
        if (!machine) throw new HostError(404, `no machine ${id}`);
        return this.forward(machine, req, res, `/${parts[2]}${url.search}`);
      }
    }
    throw new HostError(404, `no route ${method} ${url.pathname}`);
  }
}

/** Serves `host` on 127.0.0.1:`port`; resolves with the server once it listens. */
export function serve(host, { port, token }) {
  const server = createServer((req, res) => {
    if (!authorized(req, token)) {
      req.resume();
      return sendJson(res, 401, { error: "the machine host needs Authorization: Bearer <MACHINE_HOST_TOKEN>" });
    }
    host.route(req, res).catch((err) => {
      if (res.headersSent) return res.destroy();
      if (err instanceof HostError) return sendJson(res, err.status, { error: err.message });
      host.log(`machine host: ${err.stack ?? err}`);
      sendJson(res, 500, { error: "the machine host failed; see its log" });
    });
  });
  server.requestTimeout = 0; // a long exec holds its request open
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, "127.0.0.1", () => resolve(server));
  });
}

const settings = {
  command: "node machines/host/host.mjs",
  summary: "runs each machine of the `machine` plugin in a bubblewrap sandbox, for the Worker on loopback",
  doc: "docs/machines.md",
  settings: {
    MACHINE_HOST_TOKEN: { help: "the secret the Worker sends (npm start writes one into .dev.vars)", schema: z.string().min(16, "must be at least 16 characters") },
    MACHINE_HOST_PORT: { help: "the loopback port to serve (default 8789)", schema: z.coerce.number().int().min(1).max(65535).default(8789) },
    MACHINE_ROOT: { help: "the folder machines' folders are made in (default .tmp/machines/<port>, emptied at start)", schema: z.string().optional() },
  },
};

/** The folder machines' folders are made in: MACHINE_ROOT, or .tmp/machines/<port>. */
const rootOf = (port, given) => resolve(given ?? join(".tmp", "machines", String(port)));

/** The longest id a machine may have: its folder, and its sockets' paths, as long as any. */
const CHECK_ID = `check-${"0".repeat(57)}`;
const CHECK_TIMEOUT_MS = 40_000;

/**
 * --check: bubblewrap starting a sandbox is not enough (a machine whose socket
 * could not be reached passed that and timed out in every conversation). A
 * host is served on loopback as the Worker will ask it (a free port, a token of
 * its own), with the cgroups the host would use, and a machine of the longest
 * id, in a folder beside the ones machines will use, is started, given a file,
 * asked to read it back with a command, and destroyed. Answers how long that
 * took, or which step failed and why.
 */
async function checkMachine(root) {
  const started = Date.now();
  const checkRoot = `${root}-check-${process.pid}`;
  const cgroups = detectCgroups(`antiproton-machines-check-${process.pid}`);
  const host = new MachineHost({ root: checkRoot, cgroups, bubblewrap: "check", log: () => undefined });
  const token = randomBytes(24).toString("hex");
  const server = await serve(host, { port: 0, token });
  const url = `http://127.0.0.1:${server.address().port}/machines/${CHECK_ID}`;
  const ask = async (step, path, init) => {
    const res = await fetch(`${url}${path}`, { ...init, headers: { authorization: `Bearer ${token}`, "content-type": "application/json", ...init.headers }, signal: AbortSignal.timeout(CHECK_TIMEOUT_MS) }).catch((err) => {
      throw new Error(`${step}: the host did not answer (${err.cause?.message ?? err.message})`);
    });
    const body = await res.text();
    if (!res.ok) throw new Error(`${step}: ${res.status} ${body}`);
    return JSON.parse(body);
  };
  try {
    const spec = { profile: "default", cpu: 1, memoryMiB: 256, diskMiB: 16, processes: 64, allowedHosts: [] };
    await ask("starting a machine", "", { method: "PUT", body: JSON.stringify({ spec, labels: { purpose: "check" } }) });
    await ask("writing a file in it", "/file?path=check.txt", { method: "PUT", headers: { "content-type": "application/octet-stream" }, body: "round trip" });
    const ran = await ask("running a command in it", "/exec", { method: "POST", body: JSON.stringify({ command: "cat check.txt", timeoutMs: 10_000, maxOutputBytes: 1000 }) });
    if (ran.exitCode !== 0 || ran.stdout.head !== "round trip") throw new Error(`running a command in it: cat answered ${JSON.stringify(ran)}`);
    await ask("destroying it", "", { method: "DELETE" });
    return { ms: Date.now() - started, limits: cgroups.kind === "none" ? "prlimit only" : `${cgroups.kind} and prlimit` };
  } finally {
    await host.destroyAll().catch(() => undefined);
    await new Promise((done) => server.close(done));
    server.closeAllConnections();
    // What failed is the answer: cleaning up after it may fail the same way.
    const quietly = (work) => {
      try {
        work();
      } catch {
        // the step's failure says why
      }
    };
    quietly(() => rmSync(checkRoot, { recursive: true, force: true }));
    quietly(() => cgroups.remove?.());
  }
}

async function main() {
  const flags = ["--check", "--exit-with-stdin"];
  const check = process.argv.includes("--check");
  const options = check ? undefined : readSettings(settings, { argv: process.argv.slice(2).filter((arg) => !flags.includes(arg)) });
  const bubblewrap = probeBubblewrap();
  if (!bubblewrap.ok) {
    console.error(`No machine backend: ${bubblewrap.reason}.`);
    process.exit(1);
  }
  if (check) {
    const root = rootOf(process.env.MACHINE_HOST_PORT || "8789", process.env.MACHINE_ROOT || undefined);
    let ok;
    try {
      ok = await checkMachine(root);
    } catch (err) {
      console.error(`No machine backend: bubblewrap (${bubblewrap.version}) makes a sandbox here, but a machine does not work end to end: ${err.message}.`);
      process.exit(1);
    }
    console.log(`Machines can run here (${bubblewrap.version}; limits: ${ok.limits}): a machine started, ran a command over a file and was destroyed in ${(ok.ms / 1000).toFixed(1)} s.`);
    process.exit(0);
  }
  const { MACHINE_HOST_TOKEN: token, MACHINE_HOST_PORT: port, MACHINE_ROOT } = options;
  const root = rootOf(port, MACHINE_ROOT);
  // Machines do not outlive their host (bubblewrap dies with it): what a previous run left is removed.
  rmSync(root, { recursive: true, force: true });
  const cgroups = detectCgroups(`antiproton-machines-${port}`);
  await cgroups.cleanup?.();
  const host = new MachineHost({ root, cgroups, bubblewrap: bubblewrap.version });
  await serve(host, { port, token });
  console.log(`machine host on http://127.0.0.1:${port} (${bubblewrap.version}; limits: ${cgroups.kind === "none" ? `prlimit only, ${cgroups.reason}` : `${cgroups.kind} and prlimit`}; machines in ${root})`);
  // At its end the host leaves nothing: its machines, their folder and its cgroup go.
  const stop = () =>
    host
      .destroyAll()
      .then(() => {
        rmSync(root, { recursive: true, force: true });
        cgroups.remove?.();
      })
      .finally(() => process.exit(0));
  process.on("SIGINT", stop);
  process.on("SIGTERM", stop);
  if (process.argv.includes("--exit-with-stdin")) process.stdin.on("end", stop).resume();
}

if (process.argv[1] && resolve(process.argv[1]) === new URL(import.meta.url).pathname) await runConnector(settings.command, main);

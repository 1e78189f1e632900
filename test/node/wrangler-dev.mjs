// Helpers for the Node tests: starting `wrangler dev` (or `npm start`) on a free
// loopback port with its own state folder and stopping it with its whole process
// group (workerd outlives a plain kill of npx: TOOLCHAIN §11) and failing the
// test file if workerd reported an uncaught error meanwhile, a clean clone as a
// newcomer has it, a stand-in for no network, and the README's own commands.
import { execFileSync, spawn } from "node:child_process";
import { accessSync, constants, mkdtempSync, readFileSync, rmSync, symlinkSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { localWranglerEnv } from "../../scripts/wrangler-env.mjs";

export function freePort() {
  return new Promise((resolve) => {
    const server = createServer();
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

/** Two free loopback ports in a row: `npm start -- --demo` serves its inbox on PORT + 1. */
export async function freePortPair() {
  for (;;) {
    const port = await freePort();
    const next = await new Promise((resolve) => {
      const server = createServer();
      server.once("error", () => resolve(false));
      server.listen(port + 1, "127.0.0.1", () => server.close(() => resolve(true)));
    });
    if (next) return port;
  }
}

const ROOT = new URL("../..", import.meta.url).pathname;

/**
 * Where local state goes: memory (/dev/shm) where the machine has it, else the
 * temp folder. workerd writes every object's SQLite on its one thread, fsync
 * and all: on this kind of disk (about 4.5 ms an fsync) a burst of 300 turns
 * spent half that thread's time in fsync, and everything else waited. Memory
 * keeps what a killed process wrote just as the disk does (the crash tests kill
 * processes, not the machine).
 */
export function stateTmpdir() {
  try {
    accessSync("/dev/shm", constants.W_OK);
    return "/dev/shm";
  } catch {
    return tmpdir();
  }
}

/** The environment of a machine with no network, for every Node process started with it. */
export const OFFLINE_ENV = { NODE_OPTIONS: `--import=${new URL("./offline.mjs", import.meta.url).pathname}` };

/**
 * A clean clone of what is committed (no .dev.vars, no .wrangler state), as a
 * newcomer has it; the installed packages are shared to skip a second `npm install`.
 */
export function cleanClone() {
  const dir = mkdtempSync(join(tmpdir(), "antiproton-clone-"));
  execFileSync("git", ["clone", "--quiet", ROOT, dir]);
  symlinkSync(join(ROOT, "node_modules"), join(dir, "node_modules"));
  return { dir, remove: () => rmSync(dir, { recursive: true, force: true }) };
}

/** The ```sh blocks of one section ("## <title>") of README.md or a page (`docs/approvals.md`), unindented from a list item. */
export function readmeBlocks(title, page = "README.md") {
  const text = readFileSync(join(ROOT, page), "utf8");
  const section = text.split(/^## /m).find((s) => s.startsWith(title));
  if (!section) throw new Error(`${page} has no "${title}" section`);
  return [...section.matchAll(/```sh\n([\s\S]*?)```/g)].map((m) => m[1].replace(/^ {3}/gm, ""));
}

export async function until(what, check, timeoutMs = 60_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check().catch(() => undefined);
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(100);
  }
}

/**
 * workerd's own line when it pumps a response body to a client that has gone
 * (the Worker wrote after the client left, and nothing tells it sooner:
 * request.signal does not fire locally). A minimal Worker whose every write is
 * caught, or which enqueues into a ReadableStream and holds no promise at all,
 * logs it the same way, through wrangler's proxy or straight to workerd, twice
 * in most drops; it stops only when nothing is written after the client left.
 */
const CLIENT_GONE = /\[ERROR\] Uncaught Error: Network connection lost\.\s*$/;

/**
 * The lines of `output` (wrangler dev's) in which workerd reports an uncaught
 * error (a rejected waitUntil, a handler that threw), but for CLIENT_GONE. A
 * promise of ours left unhandled in a request is not printed by wrangler dev
 * at all: this catches what workerd reports, not that.
 */
export function uncaughtLines(output) {
  return output
    .replace(/\x1b\[[0-9;]*m/g, "")
    .split("\n")
    .filter((line) => /\bUncaught\b|\bUnhandled\b/.test(line) && !CLIENT_GONE.test(line));
}

/** What workerd prints when a port it was handed was taken meanwhile. */
const PORT_TAKEN = "Address already in use";

/**
 * `command` defaults to `npx wrangler dev` with `vars` passed as --var; pass
 * `{ command: ["npm", "start"] }` to run exactly what a newcomer runs. `env`
 * is added to this process's environment. `script` replaces the config's main
 * module; `persistDir` (kept by `kill`) lets a second start run on the state
 * the first one left. When workerd reported an uncaught error (uncaughtLines),
 * `stop` prints it and sets the process's exit code: the Node test file fails
 * so. (wrangler dev prints what its inspector hears, from soon after the
 * start.) The fault harness and the benchmark, which kill it mid-work on
 * purpose, pass `allowUncaught`.
 *
 * A port is free when picked, not when bound: with the Node test files and
 * their fakes starting side by side, another process may take it first (a
 * clean-clone CI run lost one of nine responses tests' starts so: workerd
 * "bind … Address already in use", and wrangler waited out the 120 s). Such a
 * start is made again on fresh ports, at most three times in all.
 */
export async function startWorker(options = {}) {
  for (let attempt = 1; ; attempt++) {
    try {
      return await startOnce(options);
    } catch (err) {
      if (!(err instanceof PortTaken) || attempt === 3 || options.port !== undefined) throw err;
    }
  }
}

class PortTaken extends Error {}

async function startOnce({ cwd, vars = {}, command, script, env = {}, persistDir: given, port: givenPort, allowUncaught = false } = {}) {
  const port = givenPort ?? (await freePort());
  let inspectorPort;
  do inspectorPort = await freePort();
  while (inspectorPort === port + 1 || inspectorPort === port + 2); // the demo inbox's port, the machine host's
  const persistDir = given ?? mkdtempSync(join(stateTmpdir(), "antiproton-dev-"));
  const args = command ?? [
    "npx", "wrangler", "dev", ...(script ? [script] : []), "--ip", "127.0.0.1", "--port", String(port), "--inspector-port", String(inspectorPort), "--persist-to", persistDir,
    ...Object.entries(vars).flatMap(([key, value]) => ["--var", `${key}:${value}`]),
  ];
  const child = spawn(args[0], args.slice(1), {
    cwd,
    detached: true,
    stdio: ["ignore", "pipe", "pipe"],
    // The caller's NODE_OPTIONS (offline, say) joins the local ones rather than replacing them.
    env: { ...localWranglerEnv({ ...process.env, ...env }), PORT: String(port), INSPECTOR_PORT: String(inspectorPort) },
  });
  let output = "";
  child.stdout.on("data", (d) => (output += d));
  child.stderr.on("data", (d) => (output += d));
  const url = `http://127.0.0.1:${port}`;
  const exited = new Promise((resolve) => child.on("exit", resolve));
  const halt = async () => {
    try {
      process.kill(-child.pid, "SIGTERM");
    } catch {}
    await sleep(200);
    if (!given) rmSync(persistDir, { recursive: true, force: true });
  };
  const stop = async () => {
    await halt();
    const uncaught = allowUncaught ? [] : uncaughtLines(output);
    if (uncaught.length === 0) return;
    // Not thrown: the caller's `after` goes on to close its fakes, and the file fails by its exit code.
    console.error(`workerd reported ${uncaught.length} uncaught error(s):\n${uncaught.join("\n")}`);
    process.exitCode = 1;
  };
  /** A crash: SIGKILL to the whole process group (wrangler and workerd), state left as it is. */
  const kill = async () => {
    try {
      process.kill(-child.pid, "SIGKILL");
    } catch {}
    await exited;
    await until("the killed process group to be gone", async () => {
      try {
        process.kill(-child.pid, 0);
        return false;
      } catch {
        return true;
      }
    }, 10_000);
  };
  let ready;
  try {
    ready = await until("wrangler dev to answer", async () => (output.includes(PORT_TAKEN) ? "taken" : (await fetch(`${url}/`)).ok), 120_000);
  } catch (err) {
    await halt();
    throw new Error(`${err.message}\n${output}`);
  }
  if (ready === "taken") {
    await halt();
    throw new PortTaken(output);
  }
  return { url, port, inspectorPort, persistDir, stop, kill, output: () => output };
}

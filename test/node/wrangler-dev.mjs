// Starts `wrangler dev` (or `npm start`) on a free loopback port for a Node test,
// with its own state folder, and stops it with its whole process group (workerd
// outlives a plain kill of npx: TOOLCHAIN §11).
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";

export function freePort() {
  return new Promise((resolve) => {
    const server = createServer();
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
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
 * `command` defaults to `npx wrangler dev` with `vars` passed as --var; pass
 * `{ command: ["npm", "start"] }` to run exactly what a newcomer runs. `script`
 * replaces the config's main module; `persistDir` (kept by `kill`) lets a
 * second start run on the state the first one left.
 */
export async function startWorker({ cwd, vars = {}, command, script, persistDir: given, port: wanted } = {}) {
  const [port, inspectorPort] = [wanted ?? (await freePort()), await freePort()];
  const persistDir = given ?? mkdtempSync(join(tmpdir(), "antiproton-dev-"));
  const args = command ?? [
    "npx", "wrangler", "dev", ...(script ? [script] : []), "--ip", "127.0.0.1", "--port", String(port), "--inspector-port", String(inspectorPort), "--persist-to", persistDir,
    ...Object.entries(vars).flatMap(([key, value]) => ["--var", `${key}:${value}`]),
  ];
  const child = spawn(args[0], args.slice(1), {
    cwd,
    detached: true,
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, WRANGLER_SEND_METRICS: "false", PORT: String(port), INSPECTOR_PORT: String(inspectorPort) },
  });
  let output = "";
  child.stdout.on("data", (d) => (output += d));
  child.stderr.on("data", (d) => (output += d));
  const url = `http://127.0.0.1:${port}`;
  const exited = new Promise((resolve) => child.on("exit", resolve));
  const stop = async () => {
    try {
      process.kill(-child.pid, "SIGTERM");
    } catch {}
    await sleep(200);
    if (!given) rmSync(persistDir, { recursive: true, force: true });
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
  try {
    await until("wrangler dev to answer", async () => (await fetch(`${url}/`)).ok, 120_000);
  } catch (err) {
    await stop();
    throw new Error(`${err.message}\n${output}`);
  }
  return { url, port, persistDir, stop, kill, output: () => output };
}

// The real machine host (machines/host/host.mjs) for the tests, on a free
// loopback port with a token of its own, plus a small window onto it that the
// workerd tests cannot have themselves: its log lines, and whether anything
// of a machine is left on this host (a process whose command line holds a
// marker, a machine folder).
import { spawn, spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { listen, sendJson } from "../fakes/http.mjs";
import { freePort } from "../node/wrangler-dev.mjs";

const ROOT = new URL("../..", import.meta.url).pathname;
const HOST = join(ROOT, "machines", "host", "host.mjs");


/** Host pids whose command line holds `marker`. */
function processesWith(marker) {
  const found = [];
  for (const pid of readdirSync("/proc")) {
    if (!/^\d+$/.test(pid) || Number(pid) === process.pid) continue;
    try {
      const cmdline = readFileSync(`/proc/${pid}/cmdline`, "utf8").replaceAll("\0", " ");
      const state = readFileSync(`/proc/${pid}/stat`, "utf8").replace(/^.*\)/, "");
      if (cmdline.includes(marker) && !/ Z /.test(state)) found.push(Number(pid));
    } catch {
      // gone meanwhile
    }
  }
  return found;
}

/**
 * Starts the host; `bindings` point the Worker at it. Where bubblewrap is
 * missing there is no host: MACHINE_HOST_MISSING says why, and the machine
 * tests fail with that sentence.
 */
export async function startMachineHost() {
  const port = await freePort();
  // Deeper than a clone anywhere is likely to be: a machine's sockets in it are past a unix socket path's 107 bytes
  // wherever the repository is, so the tests prove the host reaches them from any clone (sandbox.mjs, shortNames).
  const root = join(ROOT, ".tmp", "machines", `test-${port}-as-deep-as-a-clone-in-a-long-home-folder-of-a-ci-runner-could-be`);
  // The check starts a machine in a folder beside `root`, of the same depth.
  const check = spawnSync(process.execPath, [HOST, "--check"], { encoding: "utf8", env: { ...process.env, MACHINE_ROOT: root } });
  if (check.status !== 0) return { bindings: { MACHINE_BACKEND: "none", MACHINE_HOST_MISSING: (check.stderr || check.stdout).trim() }, close: async () => {} };
  const token = randomBytes(24).toString("hex");
  const lines = [];
  // stdin is the host's lifeline (--exit-with-stdin): when this process ends, however it ends, the host destroys its machines and exits.
  const child = spawn(process.execPath, [HOST, "--exit-with-stdin"], {
    env: { ...process.env, MACHINE_HOST_TOKEN: token, MACHINE_HOST_PORT: String(port), MACHINE_ROOT: root },
    stdio: ["pipe", "pipe", "pipe"],
  });
  for (const s of [child.stdout, child.stderr]) s.on("data", (chunk) => lines.push(...String(chunk).split("\n").filter(Boolean)));
  // The test run may end without close(): the host must not hold it open (it exits when its stdin closes).
  child.unref();
  for (const s of [child.stdin, child.stdout, child.stderr]) s.unref();
  const url = `http://127.0.0.1:${port}`;
  for (let i = 0; ; i++) {
    const up = await fetch(`${url}/health`, { headers: { authorization: `Bearer ${token}` } }).then((r) => r.ok, () => false);
    if (up) break;
    if (child.exitCode !== null || i > 200) throw new Error(`the machine host did not start: ${lines.join("\n")}`);
    await sleep(50);
  }
  const window = await listen(async (req, res) => {
    const query = new URL(req.url, "http://x").searchParams;
    if (req.url.startsWith("/log")) return sendJson(res, 200, lines);
    if (req.url.startsWith("/processes")) return sendJson(res, 200, processesWith(query.get("marker") ?? "\0"));
    if (req.url.startsWith("/folder")) return sendJson(res, 200, { exists: existsSync(join(root, query.get("id") ?? "\0")) });
    return sendJson(res, 404, { error: "no route" });
  });
  return {
    bindings: { MACHINE_BACKEND: "local", MACHINE_HOST_URL: url, MACHINE_HOST_TOKEN: token, MACHINE_HOST_WINDOW_URL: window.url },
    async close() {
      child.stdin.end();
      await new Promise((resolve) => (child.exitCode !== null ? resolve() : child.once("exit", resolve)));
      await window.close();
    },
  };
}

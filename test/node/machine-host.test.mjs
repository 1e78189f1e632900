// The machine host as npm start runs it: it says why there is no machine
// backend where bubblewrap is missing (and npm start goes on without one),
// and it never outlives whoever started it, however that ends: its machines
// (processes and folders) go with it.
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { cleanClone, freePort, freePortPair, startWorker, until } from "./wrangler-dev.mjs";

const ROOT = new URL("../..", import.meta.url).pathname;
const HOST = join(ROOT, "machines", "host", "host.mjs");

/** One folder for PATH with every program this PATH finds but bwrap: a machine without bubblewrap. */
function pathWithoutBubblewrap() {
  const dir = mkdtempSync(join(tmpdir(), "antiproton-no-bwrap-"));
  for (const folder of (process.env.PATH ?? "").split(":")) {
    let names = [];
    try {
      names = readdirSync(folder);
    } catch {
      continue;
    }
    for (const name of names) {
      if (name === "bwrap" || existsSync(join(dir, name))) continue;
      symlinkSync(join(folder, name), join(dir, name));
    }
  }
  return dir;
}

const removeLater = [];
/** npm start runs in a clean clone, as a newcomer has it (it writes .dev.vars). */
let clone;
before(() => {
  clone = cleanClone();
});
after(() => {
  clone?.remove();
  removeLater.forEach((dir) => rmSync(dir, { recursive: true, force: true }));
});

function liveWith(marker) {
  return readdirSync("/proc").filter((pid) => {
    try {
      return readFileSync(`/proc/${pid}/cmdline`, "utf8").includes(marker) && !/ Z /.test(readFileSync(`/proc/${pid}/stat`, "utf8").replace(/^.*\)/, ""));
    } catch {
      return false;
    }
  });
}

test("without bubblewrap, the host's check says so in one sentence and fails", () => {
  const bin = pathWithoutBubblewrap();
  removeLater.push(bin);
  const check = spawnSync(process.execPath, [HOST, "--check"], { encoding: "utf8", env: { ...process.env, PATH: bin } });
  assert.equal(check.status, 1);
  assert.equal(check.stderr.trim(), "No machine backend: bubblewrap (bwrap) is not installed: apt-get install bubblewrap.");
});

test("the host's check starts a machine end to end, and where none can work says which step failed, though bubblewrap starts", () => {
  const ok = spawnSync(process.execPath, [HOST, "--check"], { encoding: "utf8" });
  assert.equal(ok.status, 0, ok.stderr);
  assert.match(ok.stdout, /^Machines can run here \(bubblewrap [\d.]+; limits: .+\): a machine started, ran a command over a file and was destroyed in [\d.]+ s\.\n$/);
  // A folder for machines that cannot be made (under a file): bubblewrap itself is fine.
  const failed = spawnSync(process.execPath, [HOST, "--check"], { encoding: "utf8", env: { ...process.env, MACHINE_ROOT: "/dev/null/machines" } });
  assert.equal(failed.status, 1);
  assert.match(failed.stderr, /^No machine backend: bubblewrap \(bubblewrap [\d.]+\) makes a sandbox here, but a machine does not work end to end: starting a machine: 503 .*ENOTDIR/);
});

test("npm start without bubblewrap says there is no machine backend and serves the Worker anyway", async () => {
  const bin = pathWithoutBubblewrap();
  removeLater.push(bin);
  const worker = await startWorker({ cwd: clone.dir, command: ["npm", "start"], env: { PATH: bin }, port: await freePortPair() });
  try {
    assert.match(worker.output(), /No machine backend: bubblewrap \(bwrap\) is not installed: apt-get install bubblewrap\. Mounts of the machine plugin answer that none is available/);
    assert.equal((await fetch(`${worker.url}/`)).status, 200);
  } finally {
    await worker.stop();
  }
});

test("npm start serves the machine host on PORT + 2, and stopping npm start stops it", async () => {
  const port = await freePortPair();
  const worker = await startWorker({ cwd: clone.dir, command: ["npm", "start"], port, env: { MACHINE_HOST_PORT: String(port + 2) } });
  try {
    assert.match(worker.output(), /\[machines\] Machines can run here \(bubblewrap .*\): a machine started, ran a command over a file and was destroyed/);
    assert.match(worker.output(), new RegExp(`\\[machines\\] machine host on http://127\\.0\\.0\\.1:${port + 2} \\(bubblewrap`));
    assert.equal((await fetch(`http://127.0.0.1:${port + 2}/health`)).status, 401);
  } finally {
    await worker.stop();
  }
  await until("the host to stop", async () => (await fetch(`http://127.0.0.1:${port + 2}/health`).then(() => false, () => true)));
});

test("a host whose parent is killed (SIGKILL) destroys its machines and exits", async () => {
  const port = await freePort();
  const token = randomBytes(16).toString("hex");
  const root = mkdtempSync(join(tmpdir(), "antiproton-machines-"));
  removeLater.push(root);
  // A parent that starts the host as npm start does, then is killed without a word.
  const parent = spawn(process.execPath, ["-e", `require("node:child_process").spawn(process.execPath, [${JSON.stringify(HOST)}, "--exit-with-stdin"], { stdio: ["pipe", "inherit", "inherit"] }); setInterval(() => {}, 1000);`], {
    env: { ...process.env, MACHINE_HOST_TOKEN: token, MACHINE_HOST_PORT: String(port), MACHINE_ROOT: root },
    stdio: "ignore",
  });
  const url = `http://127.0.0.1:${port}`;
  const auth = { authorization: `Bearer ${token}` };
  await until("the host", async () => (await fetch(`${url}/health`, { headers: auth })).ok);
  const spec = { profile: "default", cpu: 1, memoryMiB: 256, diskMiB: 32, processes: 64, allowedHosts: [] };
  assert.equal((await fetch(`${url}/machines/orphan`, { method: "PUT", headers: auth, body: JSON.stringify({ spec }) })).status, 201);
  const exec = await fetch(`${url}/machines/orphan/exec`, { method: "POST", headers: auth, body: JSON.stringify({ command: "(sleep 733.25 &)", timeoutMs: 5000, maxOutputBytes: 100 }) });
  assert.equal(exec.status, 200);
  assert.equal(liveWith("733.25").length, 1);
  assert.ok(existsSync(join(root, "orphan")));

  parent.kill("SIGKILL");
  await until("the host to exit", async () => (await fetch(`${url}/health`).then(() => false, () => true)), 15_000);
  await until("the machine's processes to be gone", async () => liveWith("733.25").length === 0, 15_000);
  assert.equal(existsSync(join(root, "orphan")), false);
});

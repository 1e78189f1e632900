// One machine on this host: machined in a bubblewrap sandbox with its own
// mount, pid, network, IPC, UTS and user namespaces, no capabilities, the
// host's /usr read-only, a size-limited tmpfs as its workspace (its disk),
// a control group where the host has them, and prlimit for the rest.
// Destroying it kills every process it holds and removes its folder.
import { spawn, spawnSync } from "node:child_process";
import { closeSync, linkSync, lstatSync, mkdirSync, openSync, readdirSync, readFileSync, readlinkSync, rmSync, writeFileSync } from "node:fs";
import { request } from "node:http";
import { createServer } from "node:net";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { startProxy } from "./proxy.mjs";

const MACHINED = new URL("../machined.mjs", import.meta.url).pathname;
const MIB = 1024 * 1024;
const START_TIMEOUT_MS = 15_000;
const UID = 1000;
/** The fd machined finds its listening socket on (0-2 are stdio, 3 is bubblewrap's info). */
const LISTEN_FD = 4;

/** The host's /etc files a machine gets (read-only): no credentials, no host configuration beyond what programs need to run. */
const ETC = ["alternatives", "ssl", "ca-certificates", "ca-certificates.conf", "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime", "nsswitch.conf", "protocols", "services", "mime.types", "os-release", "debian_version"];

/** bubblewrap's version, or why it cannot make a sandbox here. */
export function probeBubblewrap() {
  const version = spawnSync("bwrap", ["--version"], { encoding: "utf8" });
  if (version.error) return { ok: false, reason: "bubblewrap (bwrap) is not installed: apt-get install bubblewrap" };
  const run = spawnSync("bwrap", [...namespaceArgs(), "--ro-bind", "/usr", "/usr", ...usrLinks(), "--", "/usr/bin/true"], { encoding: "utf8" });
  if (run.status !== 0) return { ok: false, reason: `bubblewrap cannot make a sandbox here: ${(run.stderr || run.error?.message || `exit ${run.status}`).trim()}` };
  return { ok: true, version: version.stdout.trim() };
}

function namespaceArgs() {
  return ["--unshare-all", "--unshare-user", "--disable-userns", "--die-with-parent", "--new-session", "--cap-drop", "ALL"];
}

/** Merged-/usr systems link /bin and friends into /usr; others get them bound read-only. */
function usrLinks() {
  const args = [];
  for (const dir of ["bin", "sbin", "lib", "lib64", "lib32"]) {
    let stat;
    try {
      stat = lstatSync(`/${dir}`);
    } catch {
      continue;
    }
    if (stat.isSymbolicLink()) args.push("--symlink", `usr/${dir}`, `/${dir}`);
    else args.push("--ro-bind", `/${dir}`, `/${dir}`);
  }
  return args;
}

/** What every machine sees of the host: /usr and its links, the /etc files above, /proc and /dev; all read-only but /dev. */
export function systemArgs() {
  const args = ["--ro-bind", "/usr", "/usr", ...usrLinks()];
  for (const name of ETC) args.push("--ro-bind-try", `/etc/${name}`, `/etc/${name}`);
  args.push("--proc", "/proc", "--dev", "/dev");
  return args;
}

function bwrapArgs(folder, spec) {
  // fd 3: bubblewrap writes the sandbox's first pid there, which names its pid namespace.
  const args = [...namespaceArgs(), "--info-fd", "3", "--hostname", "machine", "--uid", String(UID), "--gid", String(UID), "--clearenv"];
  const env = {
    PATH: "/usr/local/bin:/usr/bin:/bin",
    MACHINED_LISTEN_FD: String(LISTEN_FD),
    MACHINED_WORKSPACE: "/workspace",
    MACHINED_MEMORY_BYTES: String(spec.memoryMiB * MIB),
  };
  if (spec.allowedHosts.length) env.MACHINED_PROXY_SOCKET = "/run/machine/proxy.sock";
  for (const [name, value] of Object.entries(env)) args.push("--setenv", name, value);
  args.push(...systemArgs());
  for (const name of ["passwd", "group", "hosts"]) args.push("--ro-bind", join(folder, "etc", name), `/etc/${name}`);
  // The workspace is the machine's disk: a tmpfs of the mount's size; /tmp lives in it, so it counts too.
  args.push("--size", String(spec.diskMiB * MIB), "--tmpfs", "/workspace", "--perms", "1777", "--dir", "/workspace/.tmp", "--symlink", "/workspace/.tmp", "/tmp");
  // Read-only: the machine can neither replace its socket nor write to the host's disk.
  args.push("--ro-bind", join(folder, "run"), "/run/machine");
  args.push("--ro-bind", MACHINED, "/opt/machine/machined.mjs", "--ro-bind", process.execPath, "/opt/machine/node");
  args.push("--chdir", "/workspace", "--", "/opt/machine/node", "/opt/machine/machined.mjs");
  return args;
}

function health(socketPath) {
  return new Promise((resolve) => {
    const req = request({ socketPath, path: "/health", timeout: 1000 }, (res) => {
      res.resume();
      resolve(res.statusCode === 200);
    });
    req.on("error", () => resolve(false));
    req.on("timeout", () => req.destroy());
    req.end();
  });
}

/**
 * A unix socket's path holds at most 107 bytes (sun_path), and Node cuts a
 * longer one short without a word: it listens, and connects, somewhere else.
 * A machine's sockets sit deep in its folder (a clone's path, .tmp/machines/
 * <port>/, a 42-character id, run/machined.sock: past 107 from a clone at
 * /tmp/antiproton-clone-XXXXXX on), so the host names them through an open
 * handle on the folder instead, /proc/self/fd/<fd>/<name>, which is short
 * wherever the folder is. `close()` once its sockets are closed.
 */
export function shortNames(folder) {
  const fd = openSync(folder, "r");
  return { at: (name) => `/proc/self/fd/${fd}/${name}`, close: () => closeSync(fd) };
}

/**
 * The socket machined serves, made by the host in the machine's folder so the
 * machine cannot replace it: listening, to be handed over. Node removes a
 * socket's name when its server closes, so it is made under a name of its own
 * and linked where the host connects.
 */
async function listenOn(run) {
  const listener = createServer();
  await new Promise((resolve, reject) => listener.once("error", reject).listen(run.at("listen.sock"), resolve));
  linkSync(run.at("listen.sock"), run.at("machined.sock"));
  return listener;
}

/**
 * Starts a machine in `folder` (made fresh). Resolves once machined answers;
 * `onExit` is called if its sandbox ends by itself later.
 */
export async function startSandbox({ id, folder, spec, cgroups, onExit }) {
  rmSync(folder, { recursive: true, force: true });
  mkdirSync(join(folder, "run"), { recursive: true });
  mkdirSync(join(folder, "etc"));
  writeFileSync(join(folder, "etc", "passwd"), `machine:x:${UID}:${UID}:machine:/workspace:/bin/sh\n`);
  writeFileSync(join(folder, "etc", "group"), `machine:x:${UID}:\n`);
  writeFileSync(join(folder, "etc", "hosts"), "127.0.0.1 localhost machine\n::1 localhost\n");
  const run = shortNames(join(folder, "run"));
  const socketPath = run.at("machined.sock");
  const parts = { folder, run, socketPath, group: undefined, proxy: undefined, child: undefined, stderr: "" };
  try {
    if (cgroups.create) parts.group = cgroups.create(id, { memoryBytes: spec.memoryMiB * MIB, cpu: spec.cpu, processes: spec.processes });
    if (spec.allowedHosts.length) parts.proxy = await startProxy(run.at("proxy.sock"), spec.allowedHosts);
    // The first process joins the machine's cgroup before it becomes bubblewrap, so nothing it starts is outside it.
    const join_ = ["/bin/sh", "-c", 'for f in $CGROUP_PROCS; do echo $$ > "$f" || exit 97; done; exec "$@"', "join-cgroup"];
    const argv = [...join_, "prlimit", "--nofile=4096:4096", "--core=0", "--", "bwrap", ...bwrapArgs(folder, spec)];
    const listener = await listenOn(run);
    const child = spawn(argv[0], argv.slice(1), { detached: true, stdio: ["ignore", "ignore", "pipe", "pipe", listener._handle.fd], env: { PATH: process.env.PATH, CGROUP_PROCS: parts.group?.procsFiles.join(" ") ?? "" } });
    // machined has it now; this process accepts nothing on it.
    listener.close();
    parts.child = child;
    child.stderr.on("data", (chunk) => (parts.stderr = (parts.stderr + chunk).slice(-2000)));
    let info = "";
    child.stdio[3].on("data", (chunk) => {
      info += chunk;
      const pid = /"child-pid":\s*(\d+)/.exec(info)?.[1];
      if (pid && !parts.pidNamespace) parts.pidNamespace = pidNamespaceOf(Number(pid));
    });
    let exited = false;
    child.on("exit", (code, signal) => {
      exited = true;
      onExit?.({ code, signal, stderr: parts.stderr });
    });
    const deadline = Date.now() + START_TIMEOUT_MS;
    while (!(await health(socketPath))) {
      if (exited) throw new Error(`the sandbox ended as it started: ${parts.stderr.trim() || "no message"}`);
      if (Date.now() > deadline) throw new Error(`machined did not answer within ${START_TIMEOUT_MS} ms`);
      await sleep(25);
    }
    return parts;
  } catch (err) {
    await stopSandbox(parts);
    throw err;
  }
}

function pidNamespaceOf(pid) {
  try {
    return readlinkSync(`/proc/${pid}/ns/pid`);
  } catch {
    return undefined;
  }
}

/** The host pids of the live processes in a pid namespace (a zombie has ended: it only waits to be reaped by whoever adopted it). */
function processesIn(namespace) {
  return readdirSync("/proc").filter((name) => /^\d+$/.test(name) && pidNamespaceOf(name) === namespace && !isZombie(name));
}

function isZombie(pid) {
  try {
    return / Z /.test(readFileSync(`/proc/${pid}/stat`, "utf8").replace(/^.*\)/, ""));
  } catch {
    return true; // gone meanwhile
  }
}

/** Kills every process of the machine and removes its folder; safe to call twice. */
export async function stopSandbox(parts) {
  const child = parts.child;
  if (child && child.exitCode === null && child.signalCode === null) {
    const gone = new Promise((resolve) => child.once("exit", resolve));
    try {
      // bubblewrap's process group; its pid namespace's init dies with it, and the kernel kills the rest of the namespace.
      process.kill(-child.pid, "SIGKILL");
    } catch {
      // already gone
    }
    await gone;
  }
  await parts.group?.destroy();
  // The kernel kills a pid namespace's processes once its init is gone; the folder goes only when they have.
  for (let i = 0; parts.pidNamespace && processesIn(parts.pidNamespace).length > 0; i++) {
    if (i === 250) throw new Error(`processes of ${parts.folder} are still running`);
    await sleep(20);
  }
  await parts.proxy?.close();
  if (parts.run) {
    parts.run.close();
    parts.run = undefined;
  }
  rmSync(parts.folder, { recursive: true, force: true });
}

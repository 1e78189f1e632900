// CPU time of processes, read from outside through Linux's /proc: utime +
// stime of /proc/<pid>/stat (all of the process's threads), in ms. Used by the
// peer section to charge a batch of turns to the processes that served them:
// the workerd processes `wrangler dev` started, and the peer's Node process.
import { execFileSync } from "node:child_process";
import { readFileSync, readdirSync, readlinkSync } from "node:fs";

const TICK_MS = 1000 / Number(execFileSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).trim());

/** The fields of /proc/<pid>/stat after the command name (which may hold spaces): [state, ppid, pgrp, …]. */
function statFields(pid) {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  return stat.slice(stat.lastIndexOf(")") + 2).split(" ");
}

/** User + system CPU time of a process so far, in ms (0 once it is gone). */
export function cpuMs(pid) {
  try {
    const f = statFields(pid);
    return (Number(f[11]) + Number(f[12])) * TICK_MS;
  } catch {
    return 0;
  }
}

const cmdline = (pid) => {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0");
  } catch {
    return [];
  }
};
const pids = () => readdirSync("/proc").filter((name) => /^\d+$/.test(name)).map(Number);

/**
 * The workerd processes of the `wrangler dev` serving `port`: the runtime (the
 * Worker and its objects, queues, alarms) and wrangler's proxy in front of it
 * (a workerd bound to the port itself, which a deployed Worker does not have).
 * Found through the process group of the wrangler process started with `--port <port>`.
 */
export function workerdOf(port) {
  const wrangler = pids().find((pid) => {
    const args = cmdline(pid);
    return args.some((a) => a.includes("wrangler")) && args.includes("dev") && args[args.indexOf("--port") + 1] === String(port);
  });
  if (wrangler === undefined) throw new Error(`no wrangler dev process with --port ${port}`);
  const group = statFields(wrangler)[2];
  const found = { runtime: [], proxy: [] };
  for (const pid of pids()) {
    let fields;
    try {
      fields = statFields(pid);
    } catch {
      continue;
    }
    const args = cmdline(pid);
    if (fields[2] !== group || !args[0]?.endsWith("/workerd")) continue;
    (args.includes(`--socket-addr=entry=127.0.0.1:${port}`) ? found.proxy : found.runtime).push(pid);
  }
  if (found.runtime.length === 0) throw new Error(`no workerd runtime process under the wrangler dev on port ${port}`);
  return found;
}

/** The summed CPU time of some processes, in ms. */
export const cpuOf = (list) => list.reduce((sum, pid) => sum + cpuMs(pid), 0);

/** The TCP ports a process listens on (IPv4), from /proc/net/tcp and the process's socket inodes. */
export function listeningPorts(pid) {
  const inodes = new Set();
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    try {
      const link = readlinkSync(`/proc/${pid}/fd/${fd}`);
      if (link.startsWith("socket:[")) inodes.add(link.slice(8, -1));
    } catch {}
  }
  // Each row: sl local_address rem_address st … inode; st 0A is LISTEN.
  return readFileSync("/proc/net/tcp", "utf8")
    .split("\n")
    .slice(1)
    .map((line) => line.trim().split(/\s+/))
    .filter((f) => f[3] === "0A" && inodes.has(f[9]))
    .map((f) => parseInt(f[1].split(":")[1], 16));
}

// A control group per machine where the host may make one: the machine's
// memory, CPU and process count are limited as a whole, and destroying it
// kills every process it holds. cgroup v2 needs a delegated subtree whose
// controllers can be enabled (the host's own cgroup must not hold processes
// itself); cgroup v1 needs writable memory, cpu and pids hierarchies. Where
// neither works the host says why and runs machines with prlimit alone.
import { existsSync, mkdirSync, readdirSync, readFileSync, rmdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";

const ROOT = "/sys/fs/cgroup";
const V1_CONTROLLERS = ["memory", "cpu", "pids"];
const CPU_PERIOD_US = 100_000;

function ownPaths() {
  const paths = {};
  for (const line of readFileSync("/proc/self/cgroup", "utf8").split("\n")) {
    const [, controllers, path] = line.split(":");
    if (path === undefined) continue;
    if (controllers === "") paths.unified = path;
    for (const c of controllers.split(",")) if (c) paths[c] = path;
  }
  return paths;
}

function write(file, value) {
  writeFileSync(file, String(value));
}

function pidsIn(dir) {
  try {
    return readFileSync(join(dir, "cgroup.procs"), "utf8").split("\n").filter(Boolean).map(Number);
  } catch {
    return [];
  }
}

async function killAll(dirs, useKillFile) {
  for (let round = 0; round < 100; round++) {
    const pids = [...new Set(dirs.flatMap(pidsIn))];
    if (pids.length === 0) return;
    if (useKillFile) {
      for (const dir of dirs) if (existsSync(join(dir, "cgroup.kill"))) write(join(dir, "cgroup.kill"), 1);
    } else {
      for (const pid of pids) {
        try {
          process.kill(pid, "SIGKILL");
        } catch {
          // gone already
        }
      }
    }
    await sleep(20);
  }
  throw new Error(`processes are still running in ${dirs.join(", ")}`);
}

function removeDirs(dirs) {
  for (const dir of dirs) {
    try {
      rmdirSync(dir);
    } catch (err) {
      if (err.code !== "ENOENT") throw err;
    }
  }
}

/** A machine's cgroup: the files its first process joins, and how to empty and remove it. */
function group(dirs, useKillFile) {
  return {
    procsFiles: dirs.map((d) => join(d, "cgroup.procs")),
    async destroy() {
      await killAll(dirs, useKillFile);
      removeDirs(dirs);
    },
  };
}

function v2(base) {
  return {
    kind: "cgroup v2",
    create(name, limits) {
      const dir = join(base, name);
      mkdirSync(dir);
      try {
        write(join(dir, "memory.max"), limits.memoryBytes);
        if (existsSync(join(dir, "memory.swap.max"))) write(join(dir, "memory.swap.max"), 0);
        write(join(dir, "cpu.max"), `${Math.round(limits.cpu * CPU_PERIOD_US)} ${CPU_PERIOD_US}`);
        write(join(dir, "pids.max"), limits.processes);
      } catch (err) {
        removeDirs([dir]);
        throw err;
      }
      return group([dir], existsSync(join(dir, "cgroup.kill")));
    },
    cleanup: () => clearStale(base, (dir) => group([dir], existsSync(join(dir, "cgroup.kill")))),
    remove: () => removeDirs([base]),
  };
}

function v1(bases) {
  return {
    kind: "cgroup v1",
    create(name, limits) {
      const dirs = V1_CONTROLLERS.map((c) => join(bases[c], name));
      for (const dir of dirs) mkdirSync(dir);
      try {
        const [memory, cpu, pids] = dirs;
        write(join(memory, "memory.limit_in_bytes"), limits.memoryBytes);
        // Without it the limit could be escaped into swap.
        if (existsSync(join(memory, "memory.memsw.limit_in_bytes"))) write(join(memory, "memory.memsw.limit_in_bytes"), limits.memoryBytes);
        write(join(cpu, "cpu.cfs_period_us"), CPU_PERIOD_US);
        write(join(cpu, "cpu.cfs_quota_us"), Math.round(limits.cpu * CPU_PERIOD_US));
        write(join(pids, "pids.max"), limits.processes);
      } catch (err) {
        removeDirs(dirs);
        throw err;
      }
      return group(dirs, false);
    },
    cleanup: () => clearStale(bases.memory, (dir) => group(V1_CONTROLLERS.map((c) => join(bases[c], dir.split("/").pop())), false)),
    remove: () => removeDirs(Object.values(bases)),
  };
}

/** Groups a host that died left behind (its machines died with it): emptied and removed. */
async function clearStale(base, groupOf) {
  for (const name of readdirSync(base)) {
    const dir = join(base, name);
    if (!existsSync(join(dir, "cgroup.procs"))) continue;
    await groupOf(dir).destroy();
  }
}

/**
 * The cgroup support this host has, proven by making a group under `name`
 * (one per host, so two hosts keep apart): `{ kind, create(name, limits),
 * cleanup() (what a dead host left), remove() (the host's own group, empty, at
 * its end) }`, or `{ kind: "none", reason }`.
 */
export function detectCgroups(name) {
  const own = ownPaths();
  const reasons = [];
  if (existsSync(join(ROOT, "cgroup.controllers"))) {
    try {
      const parent = join(ROOT, own.unified ?? "/");
      const enabled = readFileSync(join(parent, "cgroup.subtree_control"), "utf8").split(/\s+/);
      const missing = ["memory", "cpu", "pids"].filter((c) => !enabled.includes(c));
      if (missing.length) write(join(parent, "cgroup.subtree_control"), missing.map((c) => `+${c}`).join(" "));
      const base = join(parent, name);
      mkdirSync(base, { recursive: true });
      write(join(base, "cgroup.subtree_control"), "+memory +cpu +pids");
      return v2(base);
    } catch (err) {
      reasons.push(`cgroup v2: ${err.code ?? err.message} (the host needs a delegated cgroup whose controllers it can enable)`);
    }
  }
  if (V1_CONTROLLERS.every((c) => existsSync(join(ROOT, c, "cgroup.procs")))) {
    try {
      const bases = {};
      for (const c of V1_CONTROLLERS) {
        const mounted = join(ROOT, c);
        const nested = join(mounted, own[c] ?? "/");
        bases[c] = join(existsSync(nested) ? nested : mounted, name);
        mkdirSync(bases[c], { recursive: true });
      }
      return v1(bases);
    } catch (err) {
      reasons.push(`cgroup v1: ${err.code ?? err.message}`);
    }
  }
  return { kind: "none", reason: reasons.join("; ") || "no cgroup hierarchy is mounted" };
}

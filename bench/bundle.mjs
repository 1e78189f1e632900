// The bench's `bundle` section: the deployed Worker's size and its startup in
// workerd, against the Worker as it was before it was made lean (issue 24:
// 4.17 MiB / 851 KiB gzipped when filed), built in the same run from
// BENCH_BUNDLE_BASE. Both come from `wrangler deploy --dry-run`; the size is
// wrangler's own "Total Upload" line (every module: the Worker, QuickJS's wasm,
// machined.mjs), the figure Cloudflare's limits apply to.
//
// Startup is workerd's: a fresh workerd (Miniflare) loads the built modules
// behind a small entry that imports the Worker on its first request (as
// `wrangler check startup` does), so the first request's time less the
// second's is the Worker's parse and top-level evaluation. Base and lean
// alternate, so the machine's load falls on both alike.
import { execFileSync, spawnSync } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Miniflare } from "miniflare";
import { localWranglerEnv } from "../scripts/wrangler-env.mjs";

const ROOT = new URL("..", import.meta.url).pathname;
/** main before the Worker was made lean (minify, aliases, lazy provider SDKs, reduced registry). */
const BASE = process.env.BENCH_BUNDLE_BASE ?? "4125fc9";
const RUNS = Number(process.env.BENCH_STARTUP_RUNS ?? 15);

/** `wrangler deploy --dry-run` of the project at `dir` into `dir/.tmp/bundle`: the output folder and wrangler's sizes. */
function dryRun(dir) {
  const outdir = join(dir, ".tmp", "bundle");
  rmSync(outdir, { recursive: true, force: true });
  const run = spawnSync("npx", ["wrangler", "deploy", "--dry-run", "--outdir", outdir], { cwd: dir, env: localWranglerEnv(), encoding: "utf8" });
  const sizes = /Total Upload: ([\d.]+) KiB \/ gzip: ([\d.]+) KiB/.exec(run.stdout);
  if (run.status !== 0 || !sizes) throw new Error(`wrangler deploy --dry-run in ${dir} failed:\n${run.stdout}\n${run.stderr}`);
  return { outdir, rawKiB: Number(sizes[1]), gzipKiB: Number(sizes[2]) };
}

/** The commit BASE as files, next to this checkout's node_modules (the same packages: the cuts changed none). */
function baseTree() {
  const dir = mkdtempSync(join(tmpdir(), "antiproton-bundle-base-"));
  execFileSync("sh", ["-c", `git -C "${ROOT}" archive ${BASE} | tar -x -C "${dir}"`]);
  symlinkSync(join(ROOT, "node_modules"), join(dir, "node_modules"));
  return dir;
}

const MODULE_TYPES = [
  [/\.wasm$/, "CompiledWasm"],
  [/machined\.mjs$/, "Text"],
  [/\.js$/, "ESModule"],
];

/** The dry run's modules as Miniflare takes them, behind an entry that imports worker.js on its first request. */
function startupModules(outdir) {
  const built = readdirSync(outdir).flatMap((name) => {
    const type = MODULE_TYPES.find(([pattern]) => pattern.test(name))?.[1];
    return type ? [{ type, path: join(outdir, name), contents: readFileSync(join(outdir, name)) }] : [];
  });
  const entry = `export default { async fetch() { await import("./worker.js"); return new Response("ok"); } };`;
  return [{ type: "ESModule", path: join(outdir, "startup-entry.mjs"), contents: entry }, ...built];
}

/** One fresh workerd: the first request (parse and evaluate the Worker) less the second (the request alone), in ms. */
async function startupOnce(modules) {
  const mf = new Miniflare({ modules, modulesRoot: "/", compatibilityDate: "2026-04-20", compatibilityFlags: ["nodejs_compat"] });
  try {
    await mf.ready;
    const request = async () => {
      const started = performance.now();
      await (await mf.dispatchFetch("http://startup.local/")).text();
      return performance.now() - started;
    };
    const first = await request();
    return first - (await request());
  } finally {
    await mf.dispose();
  }
}

export async function bundleSection({ print, row, summary }) {
  const base = baseTree();
  try {
    const [before, after] = [dryRun(base), dryRun(ROOT)];
    print(`bundle: wrangler deploy --dry-run (Total Upload, every module), this checkout vs ${BASE} (before the lean Worker)`);
    print(row(`baseline: ${BASE}, raw`, { value: before.rawKiB }, "KiB"));
    print(row("this checkout, raw", { value: after.rawKiB }, "KiB", `${(after.rawKiB / before.rawKiB).toFixed(2)}×`));
    print(row(`baseline: ${BASE}, gzip`, { value: before.gzipKiB }, "KiB"));
    print(row("this checkout, gzip", { value: after.gzipKiB }, "KiB", `${(after.gzipKiB / before.gzipKiB).toFixed(2)}×`, { text: "≤ 600 KiB", met: after.gzipKiB <= 600 }));
    const [baseModules, leanModules] = [startupModules(before.outdir), startupModules(after.outdir)];
    const [baseMs, leanMs] = [[], []];
    for (let k = 0; k < RUNS; k++) {
      baseMs.push(await startupOnce(baseModules));
      leanMs.push(await startupOnce(leanModules));
    }
    const [b, l] = [summary(baseMs), summary(leanMs)];
    print(`  startup in workerd: the first request (parse and evaluate the Worker) less the second, a fresh workerd each, alternating`);
    print(row(`baseline: ${BASE}`, b, "ms"));
    print(row("this checkout", l, "ms", `${(l.median / b.median).toFixed(2)}×`));
  } finally {
    rmSync(base, { recursive: true, force: true });
    rmSync(join(ROOT, ".tmp", "bundle"), { recursive: true, force: true });
  }
}

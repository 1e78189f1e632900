// The deployed Worker stays lean (docs/benchmarks.md, "Bundle"): built as
// `wrangler deploy --dry-run` builds it, with esbuild's metafile, it is within
// its budget and holds none of what was cut.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { localWranglerEnv } from "../../scripts/wrangler-env.mjs";

const ROOT = new URL("../..", import.meta.url).pathname;
/**
 * The budget for the whole upload (the Worker, QuickJS's wasm, machined.mjs), gzipped: issue 24's 600 KiB
 * (back from 625 once the Gemini client was replaced: build/gemini.ts).
 */
const BUDGET_GZIP_KIB = 600;

let dir;
let gzipKiB;
/** Each module's bytes in the output: 0 when esbuild shook all of it out. */
let output;

before(() => {
  dir = mkdtempSync(join(tmpdir(), "antiproton-bundle-"));
  const meta = join(dir, "meta.json");
  const run = spawnSync("npx", ["wrangler", "deploy", "--dry-run", "--outdir", join(dir, "out"), "--metafile", meta], { cwd: ROOT, env: localWranglerEnv(), encoding: "utf8" });
  assert.equal(run.status, 0, `wrangler deploy --dry-run:\n${run.stdout}\n${run.stderr}`);
  gzipKiB = Number(/Total Upload: [\d.]+ KiB \/ gzip: ([\d.]+) KiB/.exec(run.stdout)?.[1]);
  const metafile = JSON.parse(readFileSync(meta, "utf8"));
  const worker = Object.values(metafile.outputs).find((o) => o.entryPoint);
  output = worker?.inputs ?? {};
});

after(() => rmSync(dir, { recursive: true, force: true }));

const bundled = (pattern) => Object.keys(output).filter((path) => pattern.test(path) && output[path].bytesInOutput > 0);

test(`the upload is within ${BUDGET_GZIP_KIB} KiB gzipped, with all four provider APIs in it`, () => {
  assert.ok(gzipKiB > 0, "wrangler printed the upload's size");
  assert.ok(gzipKiB <= BUDGET_GZIP_KIB, `${gzipKiB} KiB gzipped`);
  for (const api of ["anthropic", "google", "openai-completions", "openai-responses"]) {
    assert.equal(bundled(new RegExp(`@mariozechner/pi-ai/dist/providers/${api}\\.js$`)).length, 1, `pi-ai's ${api} entry is bundled`);
  }
});

test("none of what was cut is bundled: ajv, pi-ai's registry, zod's locales but its default (English)", () => {
  assert.deepEqual(bundled(/node_modules\/(ajv|ajv-formats|fast-uri)\//), []);
  assert.deepEqual(bundled(/pi-ai\/dist\/models\.generated\.js$/), []);
  assert.deepEqual(bundled(/zod\/v4\/locales\/(?!en\.js$|index\.js$)/), []);
});

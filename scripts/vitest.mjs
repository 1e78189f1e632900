// `vitest run`, with one allowance for workerd itself: workerd now and then
// dies of a segmentation fault while the pool runs or tears down a test file
// (cloudflare/workerd#6763, open), and vitest then reports "Worker exited
// unexpectedly" for a file whose tests never failed. Such a file, and only
// such a file, is run once more, and the run says so. A test that fails is
// never run again: any failed test fails the run. At its end it prints the ten
// slowest files (each file's start and end in the JSON report), so the suite's
// time is a figure people see at every run and where it goes is plain.
import { spawn } from "node:child_process";
import { readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";

const CRASH = "Worker exited unexpectedly";
/** The files named (`node scripts/vitest.mjs test/a.test.ts …`), or those vitest.config.ts includes: test/ (recursive) *.test.ts. */
const named = process.argv.slice(2);
const testFiles = named.length > 0 ? named.map((file) => relative(process.cwd(), file)) : readdirSync("test", { recursive: true, encoding: "utf8" })
  .filter((path) => path.endsWith(".test.ts"))
  .map((path) => join("test", path));

/** Runs vitest with its usual output and a JSON report; resolves with what the report and the output say. */
function run(files) {
  const report = join(tmpdir(), `vitest-report-${process.pid}-${Date.now()}.json`);
  const child = spawn("npx", ["vitest", "run", "--reporter=default", "--reporter=json", `--outputFile.json=${report}`, ...files], { stdio: ["inherit", "pipe", "pipe"] });
  let crashed = false;
  const watch = (from, to) => from.on("data", (chunk) => { crashed ||= String(chunk).includes(CRASH); to.write(chunk); });
  watch(child.stdout, process.stdout);
  watch(child.stderr, process.stderr);
  return new Promise((resolve) => child.on("close", (code) => {
    let results = [];
    try {
      results = JSON.parse(readFileSync(report, "utf8")).testResults;
      rmSync(report);
    } catch {
      // No report: vitest itself failed; the exit code says so.
    }
    resolve({ code, crashed, results });
  }));
}

/** The ten files that took longest, from each file's start and end in the report(s); a file run twice counts its last run. */
function slowestFiles(results, count = 10) {
  const byFile = new Map(results.filter((file) => file.startTime && file.endTime).map((file) => [relative(process.cwd(), file.name), file.endTime - file.startTime]));
  return [...byFile].sort((a, b) => b[1] - a[1]).slice(0, count);
}

function printSlowest(results) {
  const slowest = slowestFiles(results);
  if (slowest.length === 0) return;
  const width = Math.max(...slowest.map(([file]) => file.length));
  console.log(`\nThe ${slowest.length} slowest test files (vitest, from the first test to the last: imports and the pool not counted):`);
  for (const [file, ms] of slowest) console.log(`  ${file.padEnd(width)}  ${(ms / 1000).toFixed(1).padStart(6)} s`);
}

const first = await run(named);
if (first.code === 0) {
  printSlowest(first.results);
  process.exit(0);
}
const failedTests = first.results.flatMap((file) => file.assertionResults.filter((t) => t.status === "failed"));
// Files that did not finish green; a crash leaves its file unreported, or failed without a failed test.
const passed = new Set(first.results.filter((file) => file.status === "passed").map((file) => relative(process.cwd(), file.name)));
const unfinished = testFiles.filter((file) => !passed.has(file));
if (!first.crashed || failedTests.length > 0 || first.results.length === 0) {
  printSlowest(first.results);
  process.exit(first.code ?? 1);
}
if (unfinished.length === 0) {
  printSlowest(first.results);
  console.error(`\nworkerd crashed after every test file had passed (cloudflare/workerd#6763); the run counts as passed.`);
  process.exit(0);
}
console.error(`\nworkerd crashed during ${unfinished.join(", ")} with no test failed (cloudflare/workerd#6763): running ${unfinished.length === 1 ? "it" : "them"} once more.`);
const second = await run(unfinished);
printSlowest([...first.results, ...second.results]);
process.exit(second.code ?? 1);

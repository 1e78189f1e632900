// `vitest run`, with one allowance for workerd itself: workerd now and then
// dies of a segmentation fault while the pool runs or tears down a test file
// (cloudflare/workerd#6763, open), and vitest then reports "Worker exited
// unexpectedly" for a file whose tests never failed. Such a file, and only
// such a file, is run once more, and the run says so. A test that fails is
// never run again: any failed test fails the run.
import { spawn } from "node:child_process";
import { readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";

const CRASH = "Worker exited unexpectedly";
/** The files vitest.config.ts includes: test/ (recursive) *.test.ts. */
const testFiles = readdirSync("test", { recursive: true, encoding: "utf8" })
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

const first = await run([]);
if (first.code === 0) process.exit(0);
const failedTests = first.results.flatMap((file) => file.assertionResults.filter((t) => t.status === "failed"));
// Files that did not finish green; a crash leaves its file unreported, or failed without a failed test.
const passed = new Set(first.results.filter((file) => file.status === "passed").map((file) => relative(process.cwd(), file.name)));
const unfinished = testFiles.filter((file) => !passed.has(file));
if (!first.crashed || failedTests.length > 0 || first.results.length === 0) process.exit(first.code ?? 1);
if (unfinished.length === 0) {
  console.error(`\nworkerd crashed after every test file had passed (cloudflare/workerd#6763); the run counts as passed.`);
  process.exit(0);
}
console.error(`\nworkerd crashed during ${unfinished.join(", ")} with no test failed (cloudflare/workerd#6763): running ${unfinished.length === 1 ? "it" : "them"} once more.`);
const second = await run(unfinished);
process.exit(second.code ?? 1);

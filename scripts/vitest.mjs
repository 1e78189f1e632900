// `vitest run`, failing on any error nobody handled, with one allowance for
// workerd itself. An uncaught error fails the run, printed at the end,
// whatever the tests said, and no file is run again for one: each is handled
// where it happens, in the runtime or in the test. Two reports say so:
// vitest's own ("Unhandled Rejection", "Unhandled Error": the test's isolate
// and the objects it runs), and workerd's for what escaped to it (a rejected
// waitUntil, an alarm that threw: WORKERD_REPORT and ESCAPED below).
// The allowance: workerd now and then dies of a segmentation fault while the
// pool runs or tears down a test file (cloudflare/workerd#6763, open), and
// vitest then reports "Worker exited unexpectedly" for a file whose tests
// never failed. Such a file, and only such a file, is run once more, and the
// run says so. A test that fails is never run again: any failed test fails the
// run. At its end it prints the ten slowest files (each file's start and end
// in the JSON report), so the suite's time is a figure people see at every run
// and where it goes is plain.
import { spawn } from "node:child_process";
import { readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";

const CRASH = "Worker exited unexpectedly";
/** vitest's report of an error nobody handled in the test's isolate or its objects. */
const VITEST_UNHANDLED = /\bUnhandled (Rejection|Error)\b/;
/**
 * workerd's log (verbose: the pool turns it on) has a line for every JS
 * rejection handed back to it, "uncaught exception; source = Uncaught (in
 * promise); stack = <the error>", its frames on the lines after: an RPC
 * method's or a constructor's too, which goes on to its caller
 * (workers-sdk#14736, as vitest.config.ts's onUnhandledError). Only what
 * nobody took is followed by a second line, ESCAPED, for the same error: a
 * rejected waitUntil, an alarm that threw. Such a report is an uncaught error,
 * but for a failed subrequest (SUBREQUEST_LOST, no frame): workerd reports
 * every fetch that fails so, awaited and caught or not.
 */
const WORKERD_REPORT = /^uncaught exception; source = Uncaught[^;]*; stack = (.*)$/;
const ESCAPED = /^uncaught exception; exception = \S+: \w+: jsg\.\w*Error: /;
const FRAME = /^\s+at |^stack: /;
const SUBREQUEST_LOST = "Error: Network connection lost.";

/** Reads one stream's lines for uncaught errors into `found` (each the report's lines); a report's own lines come together. */
function uncaughtErrors(found) {
  let open = null;
  const read = (line) => {
    if (open && FRAME.test(line)) return void (line.startsWith("stack: ") || open.lines.push(line));
    if (open && ESCAPED.test(line)) {
      const lost = open.error === SUBREQUEST_LOST && open.lines.length === 1;
      if (!lost) found.push(open.lines);
      open = null;
      return;
    }
    open = null;
    const report = WORKERD_REPORT.exec(line);
    if (report) open = { error: report[1], lines: [line] };
    else if (VITEST_UNHANDLED.test(line)) found.push([line]);
  };
  return read;
}

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
  const uncaught = [];
  /** Passes `from` on to `to`, reading it line by line (a chunk may end mid-line). */
  const watch = (from, to) => {
    let partial = "";
    const readUncaught = uncaughtErrors(uncaught);
    const read = (line) => {
      const plain = line.replace(/\x1b\[[0-9;]*m/g, "");
      crashed ||= plain.includes(CRASH);
      readUncaught(plain);
    };
    from.on("data", (chunk) => {
      to.write(chunk);
      const lines = (partial + chunk).split("\n");
      partial = lines.pop();
      lines.forEach(read);
    });
    from.on("end", () => read(partial));
  };
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
    resolve({ code, crashed, uncaught: uncaught.map((lines) => lines.join("\n")), results });
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

/** Fails the run, printing them, when vitest or workerd reported uncaught errors. */
function failOnUncaught({ uncaught }, results) {
  if (uncaught.length === 0) return;
  printSlowest(results);
  console.error(`\n${uncaught.length} uncaught error${uncaught.length === 1 ? "" : "s"} (each is to be handled where it happens; the run fails):`);
  for (const report of uncaught) console.error(report.replace(/^/gm, "  "));
  process.exit(1);
}

const first = await run(named);
failOnUncaught(first, first.results);
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
failOnUncaught(second, [...first.results, ...second.results]);
printSlowest([...first.results, ...second.results]);
process.exit(second.code ?? 1);

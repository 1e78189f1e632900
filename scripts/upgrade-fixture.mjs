// Writes test/fixtures/upgrade/object.sql: runs the fixture's maker (an agent
// object driven mid-work on this checkout's code, then dumped) in workerd and
// keeps what it printed. Run it on a release's commit, before the next release
// changes the schema (test/fixtures/upgrade/README.md).
import { spawnSync } from "node:child_process";
import { writeFileSync } from "node:fs";

const run = spawnSync("npx", ["vitest", "run", "--config", "test/fixtures/upgrade/vitest.config.ts"], { encoding: "utf8", maxBuffer: 256 * 1024 * 1024 });
// The line may start with the reporter's colour codes.
const found = /UPGRADE-FIXTURE (".*")$/m.exec(run.stdout);
if (run.status !== 0 || !found) {
  process.stderr.write(`${run.stdout}\n${run.stderr}\nthe fixture's maker failed (exit ${run.status}); nothing written\n`);
  process.exit(1);
}
writeFileSync("test/fixtures/upgrade/object.sql", JSON.parse(found[1]));
console.log("wrote test/fixtures/upgrade/object.sql");

// Writes test/fixtures/upgrade/object.sql and stores.sql: runs the fixtures'
// maker (an agent object driven mid-work on this checkout's code, then dumped
// with one of each other store) in workerd and keeps what it printed. Run it
// on a release's commit, before the next release changes a schema
// (test/fixtures/upgrade/README.md).
import { spawnSync } from "node:child_process";
import { writeFileSync } from "node:fs";

const FILES = ["object.sql", "stores.sql"];
const run = spawnSync("npx", ["vitest", "run", "--config", "test/fixtures/upgrade/vitest.config.ts"], { encoding: "utf8", maxBuffer: 256 * 1024 * 1024 });
// A line may start with the reporter's colour codes.
const found = new Map([...run.stdout.matchAll(/UPGRADE-FIXTURE (\S+) (".*")$/gm)].map((m) => [m[1], JSON.parse(m[2])]));
if (run.status !== 0 || FILES.some((file) => !found.has(file))) {
  process.stderr.write(`${run.stdout}\n${run.stderr}\nthe fixtures' maker failed (exit ${run.status}); nothing written\n`);
  process.exit(1);
}
for (const file of FILES) writeFileSync(`test/fixtures/upgrade/${file}`, found.get(file));
console.log(`wrote ${FILES.map((file) => `test/fixtures/upgrade/${file}`).join(", ")}`);

// Writes the upgrade tests' fixtures under test/fixtures/upgrade/: object.sql
// and stores.sql (an agent object driven mid-work on this checkout's code, and
// one of each other store), control.sql (the control plane and the tenants'
// own objects as three tenants left them). Runs the fixtures' maker in workerd
// and keeps what it printed. Run it on a release's commit, before the next
// release changes a schema (test/fixtures/upgrade/README.md); name files to
// make only those (`node scripts/upgrade-fixture.mjs control.sql`).
import { spawnSync } from "node:child_process";
import { writeFileSync } from "node:fs";

/** Each fixture, by the maker's test that prints it. */
const MAKERS = {
  "object.sql": "dumps an agent object",
  "stores.sql": "dumps an agent object",
  "control.sql": "dumps the control plane",
};
const FILES = process.argv.length > 2 ? process.argv.slice(2) : Object.keys(MAKERS);
const unknown = FILES.filter((file) => !(file in MAKERS));
if (unknown.length > 0) {
  process.stderr.write(`no maker for ${unknown.join(", ")}; the fixtures are ${Object.keys(MAKERS).join(", ")}\n`);
  process.exit(1);
}
const only = [...new Set(FILES.map((file) => MAKERS[file]))];
const run = spawnSync("npx", ["vitest", "run", "--config", "test/fixtures/upgrade/vitest.config.ts", "-t", only.join("|")], { encoding: "utf8", maxBuffer: 256 * 1024 * 1024 });
// A line may start with the reporter's colour codes.
const found = new Map([...run.stdout.matchAll(/UPGRADE-FIXTURE (\S+) (".*")$/gm)].map((m) => [m[1], JSON.parse(m[2])]));
if (run.status !== 0 || FILES.some((file) => !found.has(file))) {
  process.stderr.write(`${run.stdout}\n${run.stderr}\nthe fixtures' maker failed (exit ${run.status}); nothing written\n`);
  process.exit(1);
}
for (const file of FILES) writeFileSync(`test/fixtures/upgrade/${file}`, found.get(file));
console.log(`wrote ${FILES.map((file) => `test/fixtures/upgrade/${file}`).join(", ")}`);

// The README's promise, run as written: a clean clone, `npm start`, then the
// Quick start curl commands get an answer from the offline local model.
import assert from "node:assert/strict";
import { execFileSync, execSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { startWorker, until } from "./wrangler-dev.mjs";

const ROOT = new URL("../..", import.meta.url).pathname;
let clone;
let worker;

/** The ```sh blocks of the README's "Quick start" section that call curl. */
function quickstartCurls() {
  const readme = readFileSync(join(ROOT, "README.md"), "utf8");
  const section = readme.split(/^## /m).find((s) => s.startsWith("Quick start"));
  assert.ok(section, "README has a Quick start section");
  return [...section.matchAll(/```sh\n([\s\S]*?)```/g)].map((m) => m[1]).filter((block) => block.includes("curl"));
}

before(async () => {
  // A clean clone of what is committed (no .dev.vars, no .wrangler state); the
  // installed packages are shared to skip a second `npm install`.
  clone = mkdtempSync(join(tmpdir(), "antiproton-clone-"));
  execFileSync("git", ["clone", "--quiet", ROOT, clone]);
  symlinkSync(join(ROOT, "node_modules"), join(clone, "node_modules"));
  worker = await startWorker({ cwd: clone, command: ["npm", "start"] });
});

after(async () => {
  await worker?.stop();
  if (clone) rmSync(clone, { recursive: true, force: true });
});

test("npm start on a clean clone answers the README's curl with the local model", async () => {
  const [post, get] = quickstartCurls().map((block) => block.replaceAll("127.0.0.1:8787", `127.0.0.1:${worker.port}`));
  assert.ok(post && get, "the Quick start shows a POST and a GET");
  const accepted = JSON.parse(execSync(post, { shell: "/bin/bash" }).toString());
  assert.equal(accepted.accepted, true);
  const view = await until("the local model's answer", async () => {
    const v = JSON.parse(execSync(get, { shell: "/bin/bash" }).toString());
    return v.status === "idle" ? v : undefined;
  });
  const roles = view.transcript.map((e) => e.role);
  assert.deepEqual(roles, ["user", "assistant", "tool", "assistant"]);
  assert.match(view.transcript.at(-1).text, /^clock__now says: \d{4}-\d\d-\d\dT/);
});

// The README's promise, run as written on a machine with no network: a clean
// clone, `npm start` (which prints no stack trace on its way to Ready), then the
// Quick start curl commands get an answer from the offline local model.
import assert from "node:assert/strict";
import { execFileSync, execSync } from "node:child_process";
import { after, before, test } from "node:test";
import { cleanClone, OFFLINE_ENV, readmeBlocks, startWorker, until } from "./wrangler-dev.mjs";

let clone;
let worker;

before(async () => {
  clone = cleanClone();
  worker = await startWorker({ cwd: clone.dir, command: ["npm", "start"], env: OFFLINE_ENV });
});

after(async () => {
  await worker?.stop();
  clone?.remove();
});

test("the test's offline stand-in really has no network", () => {
  const probe = `fetch("https://workers.cloudflare.com/cf.json").then(() => console.log("reached"), (e) => console.log(e.cause?.code))`;
  const out = execFileSync(process.execPath, ["-e", probe], { env: { ...process.env, ...OFFLINE_ENV } }).toString().trim();
  assert.equal(out, "ENOTFOUND");
});

test("npm start offline reaches Ready without a warning or a stack trace", () => {
  const output = worker.output();
  const upToReady = output.slice(0, output.indexOf("Ready on"));
  assert.ok(upToReady.length > 0, `npm start said Ready:\n${output}`);
  assert.doesNotMatch(upToReady, /^\s+at \S/m, "a stack trace");
  assert.doesNotMatch(upToReady, /ENOTFOUND|Unable to fetch|\[wrangler:warn\]/);
});

test("GET / lists the Agents API and the console, and no placeholder", async () => {
  const index = await (await fetch(`${worker.url}/`)).json();
  assert.ok(index.routes["/v1"] && index.routes["/console"]);
  assert.doesNotMatch(JSON.stringify(index), /https?:\/\//);
});

test("npm start on a clean clone answers the README's curl with the local model", async () => {
  const curls = readmeBlocks("Quick start").filter((block) => block.includes("curl"));
  const [post, get] = curls.map((block) => block.replaceAll("127.0.0.1:8787", `127.0.0.1:${worker.port}`));
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

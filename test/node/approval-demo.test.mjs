// docs/approvals.md's "Approve a call", followed on a clean clone with no network:
// `npm start -- --demo`, the page's curl asks the offline model to post, the
// console is signed into and Approve clicked over plain HTTP (as a browser
// would: forms read from the pages, their hidden fields sent back), and the
// post reaches the demo inbox only after that.
import assert from "node:assert/strict";
import { execSync } from "node:child_process";
import { after, before, test } from "node:test";
import { cleanClone, freePortPair, OFFLINE_ENV, readmeBlocks, startWorker, until } from "./wrangler-dev.mjs";

const TOKEN = "dev-admin-token";
let clone;
let worker;
let steps;

before(async () => {
  const port = await freePortPair();
  // The page's blocks with its ports (8787, and the inbox on 8788) moved to free ones.
  steps = readmeBlocks("Approve a call", "docs/approvals.md").map((block) =>
    block.trim().replaceAll("127.0.0.1:8787", `127.0.0.1:${port}`).replaceAll("127.0.0.1:8788", `127.0.0.1:${port + 1}`),
  );
  assert.equal(steps[0], "npm start -- --demo");
  clone = cleanClone();
  worker = await startWorker({ cwd: clone.dir, command: steps[0].split(" "), env: OFFLINE_ENV, port });
});

after(async () => {
  await worker?.stop();
  clone?.remove();
});

const shell = (command) => JSON.parse(execSync(command, { shell: "/bin/bash" }).toString());
const inbox = async () => (await (await fetch(`http://127.0.0.1:${worker.port + 1}/inbox`)).json()).received;

/** The forms of a page: where they post, their fields (hidden ones with values) and their button's label. */
function forms(html) {
  return [...html.matchAll(/<form\b([^>]*)>([\s\S]*?)<\/form>/g)].map(([, attrs, inner]) => ({
    action: /action="([^"]*)"/.exec(attrs)?.[1],
    fields: Object.fromEntries(
      [...inner.matchAll(/<input\b([^>]*)>/g)].map(([, a]) => [/name="([^"]*)"/.exec(a)?.[1], /value="([^"]*)"/.exec(a)?.[1] ?? ""]),
    ),
    button: /<button\b[^>]*>([\s\S]*?)<\/button>/.exec(inner)?.[1].trim(),
  }));
}

/** A browser's cookie jar, reduced to what the console sets. */
class Browser {
  cookies = new Map();
  async request(path, init = {}) {
    const res = await fetch(`${worker.url}${path}`, {
      ...init,
      redirect: "manual",
      headers: { ...init.headers, cookie: [...this.cookies].map(([k, v]) => `${k}=${v}`).join("; ") },
    });
    for (const line of res.headers.getSetCookie()) {
      const [pair] = line.split(";");
      const at = pair.indexOf("=");
      this.cookies.set(pair.slice(0, at), pair.slice(at + 1));
    }
    return res;
  }
  /** Submits the page's form whose button reads `label`, with its fields and `fill` on top. */
  async submit(page, label, fill = {}) {
    const html = await (await this.request(page)).text();
    const form = forms(html).find((f) => f.button === label);
    assert.ok(form, `${page} has a "${label}" form:\n${html}`);
    const body = new URLSearchParams({ ...form.fields, ...fill }).toString();
    // A browser names the page's origin on a form post (the console refuses cross-site posts).
    return this.request(form.action, { method: "POST", headers: { "content-type": "application/x-www-form-urlencoded", origin: worker.url }, body });
  }
}

test("npm start -- --demo: ask to post, sign into the console, approve, and the post is performed once", async () => {
  const [, ask, read] = steps;
  assert.equal(shell(ask).accepted, true);
  const held = await until("the held call", async () => {
    const v = shell(read);
    return v.status === "idle" && v.holds.length === 1 ? v : undefined;
  });
  assert.equal(held.holds[0].tool, "inbox__post");
  assert.equal(held.holds[0].state, "pending");
  assert.match(held.transcript.at(-1).text, /^I have asked for approval to run inbox__post/);
  assert.deepEqual(await inbox(), [], "nothing is posted before the approval");

  const browser = new Browser();
  const signedIn = await browser.submit("/console/login", "Sign in", { token: TOKEN });
  assert.equal(signedIn.status, 303, "the token signs in");
  const conversation = "/console/tenants/demo/agents/helper/conversations/approve-me";
  const approved = await browser.submit(conversation, "Approve");
  assert.equal(approved.status, 303);
  // The agent's answer is shown on the page the browser is sent back to.
  const shown = await (await browser.request(approved.headers.get("location"))).text();
  assert.match(shown, /Approved\. Performing it now\./);

  const done = await until("the agent's report", async () => {
    const v = shell(read);
    return v.status === "idle" && v.transcript.at(-1).text.startsWith("Update:") ? v : undefined;
  });
  assert.equal(done.holds[0].state, "performed");
  assert.match(done.transcript.at(-1).text, /^Update: the held call inbox__post \(hold \w+\) was approved by console:admin\. Performed: HTTP 200/);
  assert.deepEqual((await inbox()).map((post) => post.body), ["hello"]);
  assert.match(worker.output(), /\[demo inbox\] received a POST: hello/);
});

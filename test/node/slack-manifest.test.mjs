// docs/slack.md's "Connect Slack", the steps that run offline: the manifest's
// URLs are the Worker's Slack routes, its bot events are the ones the bridge
// reads, and Slack's URL check of the Events request URL fails until the
// Worker has the app's signing secret, then answers (step 3's "Verified").
import assert from "node:assert/strict";
import { createHmac } from "node:crypto";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { startWorker } from "./wrangler-dev.mjs";

const ROOT = new URL("../..", import.meta.url).pathname;
const SECRET = "manifest-test-signing-secret";
const page = readFileSync(join(ROOT, "docs/slack.md"), "utf8");
const manifest = page.split(/^## /m).find((s) => s.startsWith("The app manifest")).match(/```yaml\n([\s\S]*?)```/)[1];
const paths = [...manifest.matchAll(/https:\/\/agents\.example\.com(\/\S*)/g)].map((m) => m[1]);
const botEvents = manifest.match(/bot_events:\n((?:\s+- \S+\n)+)/)[1].match(/- (\S+)/g).map((e) => e.slice(2));

let worker;
before(async () => {
  worker = await startWorker({ cwd: ROOT, vars: {
    SLACK_SIGNING_SECRET: SECRET,
    ADMIN_TOKEN: "manifest-test-admin",
    // Step 4's many workspaces: the OAuth install is on.
    SLACK_CLIENT_ID: "1.2",
    SLACK_CLIENT_SECRET: "manifest-test-client-secret",
    SLACK_TOKEN_ENCRYPTION_KEY: "manifest-test-encryption-key",
  } });
});
after(async () => {
  await worker?.stop();
});

function signedBy(secret, body, contentType = "application/json") {
  const timestamp = String(Math.floor(Date.now() / 1000));
  const signature = `v0=${createHmac("sha256", secret).update(`v0:${timestamp}:${body}`).digest("hex")}`;
  return { method: "POST", headers: { "content-type": contentType, "x-slack-request-timestamp": timestamp, "x-slack-signature": signature }, body };
}

test("the manifest names the Worker's four Slack URLs", () => {
  assert.deepEqual([...new Set(paths)].sort(), ["/slack/commands", "/slack/events", "/slack/interactivity", "/slack/oauth/callback"]);
});

test("every bot event the manifest subscribes to is one the Slack bridge reads", () => {
  const ingress = readFileSync(join(ROOT, "bridges/slack/ingress.ts"), "utf8");
  const unread = botEvents.map((e) => e.replace(/^message\..*/, "message")).filter((type) => !ingress.includes(`"${type}"`));
  assert.ok(botEvents.includes("app_mention"), "the manifest's bot events are read");
  assert.deepEqual(unread, []);
});

test("Slack's URL check fails without the app's signing secret, then answers the challenge with it", async () => {
  const body = JSON.stringify({ type: "url_verification", token: "t", challenge: "prove-it" });
  const before = await fetch(`${worker.url}/slack/events`, signedBy("not-the-apps-secret", body));
  assert.equal(before.status, 401);
  const after = await fetch(`${worker.url}/slack/events`, signedBy(SECRET, body));
  assert.equal(after.status, 200);
  assert.equal((await after.json()).challenge, "prove-it");
});

test("the manifest's command and interactivity URLs are routes that verify Slack's signature", async () => {
  for (const path of ["/slack/commands", "/slack/interactivity"]) {
    const res = await fetch(`${worker.url}${path}`, signedBy("not-the-apps-secret", "a=b", "application/x-www-form-urlencoded"));
    assert.equal(res.status, 401, path);
  }
  // With no state from an install started here, the callback refuses (it is the route, not a 404).
  const callback = await fetch(`${worker.url}/slack/oauth/callback?code=c&state=s`, { redirect: "manual" });
  assert.ok([400, 403].includes(callback.status), `the OAuth redirect URL is a route (${callback.status} ${await callback.text()})`);
});

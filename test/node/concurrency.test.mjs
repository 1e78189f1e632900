// Model calls run side by side on `wrangler dev`, as deployed: twenty people
// talking to twenty agents of twenty tenants against a provider that takes 5 s
// per answer are all answered, and the provider has all twenty calls in hand
// at once (one slow call never waits for another; the queue only hands each
// effect to its courier).
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { onlyProviderVars, startModelProvider } from "../fakes/model-provider.mjs";
import { startWorker, until } from "./wrangler-dev.mjs";

const ROOT = new URL("../..", import.meta.url).pathname;
const ADMIN = "node-test-admin-token";
const AGENTS = 20;
const PROVIDER_MS = 5_000;

let provider;
let worker;

before(async () => {
  provider = await startModelProvider();
  worker = await startWorker({
    cwd: ROOT,
    vars: {
      ADMIN_TOKEN: ADMIN,
      ...onlyProviderVars(provider),
    },
  });
});

after(async () => {
  await worker?.stop();
  await provider?.close();
});

const api = (path, init = {}) => fetch(`${worker.url}/v1${path}`, { ...init, headers: { authorization: `Bearer ${ADMIN}`, "content-type": "application/json", ...init.headers } });

test(`${AGENTS} conversations in ${AGENTS} tenants against a ${PROVIDER_MS / 1000} s provider: every call in flight at once, all answered`, async () => {
  await fetch(`${provider.url}/_control/unscripted`, { method: "PUT", body: JSON.stringify({ delayMs: PROVIDER_MS }) });
  await fetch(`${provider.url}/_control/concurrency`, { method: "POST" });
  const started = Date.now();
  const tenants = Array.from({ length: AGENTS }, (_, i) => `side-by-side-${i}`);
  const sent = await Promise.all(tenants.map((t) => api(`/tenants/${t}/agents/helper/messages`, { method: "POST", body: JSON.stringify({ text: `hello from ${t}`, conversation: "c" }) })));
  assert.deepEqual(sent.map((r) => r.status), tenants.map(() => 202));
  const answers = await until("every turn to be answered", async () => {
    const views = await Promise.all(tenants.map(async (t) => (await api(`/tenants/${t}/agents/helper/conversations/c`)).json()));
    return views.every((v) => v.status === "idle") ? views : undefined;
  }, 60_000);
  const seconds = (Date.now() - started) / 1000;
  const { max } = await (await fetch(`${provider.url}/_control/concurrency`)).json();
  console.log(`${AGENTS} turns answered in ${seconds.toFixed(1)} s; the provider had at most ${max} calls in flight`);
  assert.deepEqual(answers.map((v) => v.transcript.at(-1).text), tenants.map((t) => `ok: hello from ${t}`));
  assert.equal(max, AGENTS, "every call was in flight at once");
});

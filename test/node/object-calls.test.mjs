// Calls into objects, counted in a real `wrangler dev` (the instrument of
// `BENCH_ONLY=scale npm run bench`, docs/scale.md): with COUNT_OBJECT_CALLS on,
// one turn's calls are in the Worker's count by class and method, those the
// objects make to each other included, so workerd runs them in the Worker's
// isolate as lib/object-calls.ts assumes (docs/design.md, "Counting calls into objects").
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { onlyProviderVars, startModelProvider } from "../fakes/model-provider.mjs";
import { startWorker, until } from "./wrangler-dev.mjs";

const ROOT = new URL("../..", import.meta.url).pathname;
const ADMIN = "node-test-object-calls-admin";
const auth = { authorization: `Bearer ${ADMIN}` };

let provider;
let worker;

before(async () => {
  provider = await startModelProvider();
  worker = await startWorker({
    cwd: ROOT,
    vars: {
      ADMIN_TOKEN: ADMIN,
      COUNT_OBJECT_CALLS: "true",
      ...onlyProviderVars(provider),
    },
  });
});

after(async () => {
  await worker?.stop();
  await provider?.close();
});

test("a turn's calls into objects are counted by class and method, the objects' calls to each other included", async () => {
  const post = await fetch(`${worker.url}/v1/tenants/acme/agents/helper/messages`, { method: "POST", headers: { ...auth, "content-type": "application/json" }, body: JSON.stringify({ text: "hello", conversation: "c" }) });
  assert.equal(post.status, 202);
  await until("the turn to end", async () => {
    const view = await (await fetch(`${worker.url}/v1/tenants/acme/agents/helper/conversations/c`, { headers: auth })).json();
    return view.status === "idle" && view.transcript.some((e) => e.role === "assistant");
  });
  const { objects } = await (await fetch(`${worker.url}/v1/object-calls`, { headers: auth })).json();
  const calls = (objectClass, method) => objects.filter((o) => o.objectClass === objectClass && o.method === method).reduce((sum, o) => sum + o.calls, 0);
  assert.ok(calls("AgentObject", "submit") >= 1, "the Worker's submit into the agent object");
  assert.ok(calls("Courier", "take") >= 1, "the agent object's hand-over to its courier");
  assert.ok(calls("AgentObject", "report") >= 1, "the courier's report into the agent object");
  assert.ok(calls("Ledger", "record") >= 1, "the courier's count in the ledgers");
  assert.ok(calls("ProviderGate", "admit") >= 1, "the courier's pass through the provider key's gate");
});

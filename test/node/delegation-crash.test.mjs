// Subagents survive a crash (issue 26, acceptance 1): a parent delegates four
// tasks (three run, the fourth waits for a slot), each child appends to the
// ledger (a write that is not idempotent) and then answers; `wrangler dev` is
// killed with SIGKILL (its whole process group) while a child's second model
// call is in flight, and restarted on the same state. The parent's turn then
// finishes with each child's answer once (the fourth started after the
// restart), every append made once, one final reply: nothing lost, nothing
// said or done twice.
import assert from "node:assert/strict";
import { once } from "node:events";
import { rmSync } from "node:fs";
import { after, before, test } from "node:test";
import { Gates } from "../fakes/gates.mjs";
import { crashVars, startFakes } from "../fakes/index.mjs";
import { startWorker, until } from "./wrangler-dev.mjs";

const ROOT = new URL("../..", import.meta.url).pathname;
const TENANT = "crash-delegates";
const AGENT = "lead";

const gates = new Gates();
gates.setMaxListeners(0);
const appends = new Map();
gates.on("ledger", (i) => i.op === "append" && appends.set(i.entry, (appends.get(i.entry) ?? 0) + 1));

let fakes;
let vars;
let worker;

before(async () => {
  const started = await startFakes({ gates });
  fakes = started.fakes;
  const { bindings } = started;
  vars = {
    ...crashVars(bindings),
    MOUNTS: JSON.stringify([{ alias: "ledger", plugin: "ledger", config: { url: fakes.ledger.url } }]),
  };
  worker = await startWorker({ cwd: ROOT, vars, script: "test/worker-under-test.ts" });
});

after(async () => {
  await worker?.stop();
  // The state folder the restart took over (stop removes only one its own start made).
  if (worker) rmSync(worker.persistDir, { recursive: true, force: true });
  await Promise.all(Object.values(fakes ?? {}).map((f) => f.close()));
});

const api = (path, init = {}) =>
  fetch(`${worker.url}/v1/tenants/${TENANT}/agents/${AGENT}${path}`, { ...init, headers: { authorization: `Bearer ${vars.ADMIN_TOKEN}`, "content-type": "application/json", ...init.headers } });
const scenario = (id, steps) => fetch(`${fakes.provider.url}/_control/scenarios/${id}`, { method: "PUT", body: JSON.stringify({ by: "position", steps }) });

test("SIGKILL of wrangler dev mid-child: each child's answer reaches the parent once, the queued one starts after, each append is made once", async () => {
  const run = `k${Date.now().toString(36)}`;
  const children = [1, 2, 3, 4].map((n) => ({ id: `${run}c${n}`, entry: `${run}-e${n}`, answer: `ANSWER-${n} ${run}` }));
  for (const c of children) await scenario(c.id, [{ toolCalls: [{ name: "ledger__append", arguments: { entry: c.entry } }] }, { text: c.answer }]);
  const parent = `${run}p`;
  const calls = children.map((c, i) => ({ name: "delegate", id: `d${i}`, arguments: { instructions: `[s:${c.id}] append ${c.entry}` } }));
  await scenario(parent, [{ toolCalls: calls }, { text: `REPLY ${run}` }]);

  // The kill point: the three running children each in their second model call (their appends made, their answers not yet given).
  const running = children.slice(0, 3).map((c) => c.id);
  for (const id of running) gates.holdOnce("provider", (i) => i.scenario === id && i.position === 1);
  const held = (async () => {
    const seen = new Set();
    while (seen.size < running.length) {
      const [h] = await once(gates, "held");
      if (h.fake === "provider" && running.includes(h.info.scenario)) seen.add(h.info.scenario);
    }
  })();
  const sent = await api("/messages", { method: "POST", body: JSON.stringify({ text: `[s:${parent}] four tasks`, conversation: parent }) });
  assert.equal(sent.status, 202);
  await held;
  const queued = await (await api(`/conversations/${parent}`)).json();
  assert.deepEqual(queued.family.children.map((c) => c.state), ["running", "running", "running", "queued"]);

  const killedAt = Date.now();
  const persistDir = worker.persistDir;
  await worker.kill();
  worker = await startWorker({ cwd: ROOT, vars, script: "test/worker-under-test.ts", persistDir, port: worker.port });
  const restartedAt = Date.now();

  const view = await until(
    "the parent's reply after the restart",
    async () => {
      const v = await (await api(`/conversations/${parent}`)).json();
      return v.status === "idle" && v.transcript.at(-1)?.text === `REPLY ${run}` ? v : undefined;
    },
    60_000,
  );
  console.log(`killed mid-child; wrangler dev restarted in ${restartedAt - killedAt} ms; the parent answered ${Date.now() - restartedAt} ms later`);
  const results = view.transcript.filter((e) => e.role === "tool");
  assert.deepEqual(results.map((e) => [e.toolCallId, e.text]), children.map((c, i) => [`d${i}`, c.answer]));
  assert.equal(view.transcript.filter((e) => e.role === "assistant" && e.text === `REPLY ${run}`).length, 1, "one final reply");
  assert.equal(view.turn, 1, "one turn");
  for (const c of children) assert.equal(appends.get(c.entry), 1, `${c.entry} appended once`);
  assert.deepEqual(view.family.children.map((c) => c.state), ["answered", "answered", "answered", "answered"]);
  for (const child of view.family.children) {
    const cv = await (await api(`/conversations/${child.id}`)).json();
    assert.equal(cv.transcript.filter((e) => e.role === "assistant" && e.text.startsWith("ANSWER-")).length, 1, `${child.id} answered once`);
  }
});

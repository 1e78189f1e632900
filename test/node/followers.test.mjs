// Followers are told, not asking (issue 40, acceptance 5): ten followers of
// one conversation wait a minute with nothing happening, against a wrangler
// dev of their own (so nothing else happens in it), while every agent
// object's own counters (busy_hours: each handler call, each alarm's pass,
// read from its SQLite by bench/counters.mjs) and the Worker's tally of its
// calls stay still; then the next message reaches all ten at once, and one
// that left mid-turn comes back with Last-Event-ID missing nothing.
import assert from "node:assert/strict";
import { rmSync } from "node:fs";
import { after, before, test } from "node:test";
import OpenAI from "openai";
import { objectCounters } from "../../bench/counters.mjs";
import { onlyProviderVars, startModelProvider } from "../fakes/model-provider.mjs";
import { follower } from "./follow-stream.mjs";
import { startWorker, until } from "./wrangler-dev.mjs";

const ROOT = new URL("../..", import.meta.url).pathname;
const ADMIN = "node-test-followers-admin";
const MODEL = "acme/followed";
/** How long ten followers wait with nothing happening. */
const FOLLOWERS_IDLE_MS = 60_000;

let provider;
let worker;
let client;
const follow = follower(ADMIN);

before(async () => {
  provider = await startModelProvider();
  worker = await startWorker({
    cwd: ROOT,
    vars: {
      ADMIN_TOKEN: ADMIN,
      ...onlyProviderVars(provider),
      COUNT_OBJECT_CALLS: "true",
    },
  });
  client = new OpenAI({ apiKey: ADMIN, baseURL: `${worker.url}/v1`, maxRetries: 0 });
});

after(async () => {
  await worker?.stop();
  if (worker) rmSync(worker.persistDir, { recursive: true, force: true });
  await provider?.close();
});

const script = (id, steps) => fetch(`${provider.url}/_control/scenarios/${id}`, { method: "PUT", body: JSON.stringify({ steps, by: "position" }) });
const requestsOf = async (id) => (await fetch(`${provider.url}/_control/scenarios/${id}/requests`)).json();
const release = (id) => fetch(`${provider.url}/_control/scenarios/${id}/release`, { method: "POST" });

/** Calls into agent objects this dev server's Worker has made so far (GET /v1/object-calls). */
const agentObjectCalls = async () => {
  const { objects } = await fetch(`${worker.url}/v1/object-calls`, { headers: { authorization: `Bearer ${ADMIN}` } }).then((r) => r.json());
  return objects.filter((o) => o.objectClass === "AgentObject").reduce((sum, o) => sum + o.calls, 0);
};

test("ten followers of a conversation, a minute with nothing happening: no call into any agent object and no alarm; what is written next reaches all ten within 200 ms, and one that reconnects with Last-Event-ID misses nothing", async (t) => {
  await script("followed", [{ text: "First answer." }, { hold: true, text: "Second answer." }]);
  const first = await client.responses.create({ model: MODEL, input: "[s:followed] hello" });
  const conversation = first.conversation.id;
  const url = `${worker.url}/v1/tenants/acme/agents/followed/conversations/${encodeURIComponent(conversation)}/events`;
  // Each follower reads from the start: its events and when each came.
  const followers = Array.from({ length: 10 }, () => ({ events: [], at: [], stop: false }));
  const runs = followers.map((f) =>
    follow(url, null, f.events, (events) => {
      f.at.push(Date.now());
      return f.stop || events.some((e) => e.type === "done" && e.data.turn === 2);
    }),
  );
  await until("every follower to have read the first turn", async () => followers.every((f) => f.events.some((e) => e.type === "done")));
  // Nothing happening: the agent object's own counters (busy_hours, written at each handler's end) are still a second first.
  let counters = objectCounters(worker.persistDir);
  await until("the agent objects to be still", async () => {
    await new Promise((resolve) => setTimeout(resolve, 1000));
    const now = objectCounters(worker.persistDir);
    const still = now.handlers === counters.handlers && now.passes === counters.passes;
    counters = now;
    return still;
  });
  const callsBefore = await agentObjectCalls();
  await new Promise((resolve) => setTimeout(resolve, FOLLOWERS_IDLE_MS));
  const idle = objectCounters(worker.persistDir);
  assert.equal(idle.handlers - counters.handlers, 0, "handler calls into agent objects while ten followers waited");
  assert.equal(idle.passes - counters.passes, 0, "alarms (passes) run while ten followers waited");
  // The Worker's own tally of its calls into agent objects agrees.
  assert.equal((await agentObjectCalls()) - callsBefore, 0, "calls the Worker made into agent objects while ten followers waited");

  // Something is written: the next message. Each follower hears it within 200 ms of its being accepted.
  const heard = followers.map((f) => f.events.length);
  const next = await client.responses.create({ model: MODEL, input: "and now?", conversation, background: true });
  const accepted = Date.now();
  await until("every follower to hear the message", async () => followers.every((f, i) => f.events.length > heard[i]));
  const delays = followers.map((f, i) => Math.max(0, f.at[heard[i]] - accepted));
  t.diagnostic(`the ten followers heard the message ${delays.join(", ")} ms after it was accepted`);
  assert.ok(Math.max(...delays) <= 200, `each follower heard the message ${delays.join(", ")} ms after it was accepted`);

  // One follower goes away mid-turn and comes back with Last-Event-ID: it misses nothing and repeats nothing.
  await until("the model to be asked again", async () => (await requestsOf("followed")).length === 2);
  followers[9].stop = true;
  await release("followed");
  await until("the turn to end", async () => (await client.responses.retrieve(next.id)).status === "completed");
  assert.equal(await runs[9], "enough");
  const leaving = followers[9].events.length;
  const resumed = [];
  await follow(url, String(followers[9].events[leaving - 1].id), resumed, (events) => events.some((e) => e.type === "done"));
  await Promise.all(runs.slice(0, 9));
  const whole = (events) => events.map((e) => [e.id, e.type]);
  assert.deepEqual(whole([...followers[9].events.slice(0, leaving), ...resumed]), whole(followers[0].events));
  for (const f of followers.slice(1, 9)) assert.deepEqual(whole(f.events), whole(followers[0].events));
  const said = followers[0].events.filter((e) => e.type === "message").map((e) => `${e.data.entry.role}: ${e.data.entry.text}`);
  assert.deepEqual(said, ["user: [s:followed] hello", "assistant: First answer.", "user: and now?", "assistant: Second answer."]);
});

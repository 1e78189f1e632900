// `npm run bench`: the figures that matter for a chat runtime, each printed as
// a ratio against a baseline measured in the same run on the same `wrangler dev`:
//   - a durable accept (the Agents API write) and a Slack event ack, against a
//     bare Worker request that touches no object: what the durable write costs;
//   - a whole turn (offline model, through the real queue), against the accept:
//     how much of the turn the sender does not wait for.
import { createHmac } from "node:crypto";
import { startWorker, until } from "../test/node/wrangler-dev.mjs";

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 60);
const TURNS = Number(process.env.BENCH_TURNS ?? 5);
const ADMIN = "bench-admin-token";
const SLACK_SECRET = "bench-slack-signing-secret";

const worker = await startWorker({
  cwd: new URL("..", import.meta.url).pathname,
  vars: { ADMIN_TOKEN: ADMIN, SLACK_SIGNING_SECRET: SLACK_SECRET, SLACK_BOT_TOKEN: "xoxb-bench", SLACK_API_BASE_URL: "http://127.0.0.1:9/api" },
});

async function timed(fn) {
  const start = performance.now();
  await fn();
  return performance.now() - start;
}

async function sample(name, fn, rounds = ROUNDS) {
  for (let i = 0; i < 5; i++) await fn(`warm${i}`); // warm-up: first compile, first object
  const ms = [];
  for (let i = 0; i < rounds; i++) ms.push(await timed(() => fn(i)));
  ms.sort((a, b) => a - b);
  return { name, median: ms[Math.floor(ms.length / 2)], p95: ms[Math.floor(ms.length * 0.95)] };
}

async function expect(res, status) {
  if (res.status !== status) throw new Error(`${res.url}: expected ${status}, got ${res.status} ${await res.text()}`);
  await res.arrayBuffer();
}

const run = `${Date.now()}`;
const apiPost = (conversation, text) =>
  fetch(`${worker.url}/v1/tenants/bench/agents/helper/messages`, {
    method: "POST",
    headers: { authorization: `Bearer ${ADMIN}`, "content-type": "application/json" },
    body: JSON.stringify({ text, conversation }),
  });

try {
  const baseline = await sample("bare Worker request (GET /)", async () => expect(await fetch(`${worker.url}/`), 200));
  const accept = await sample("durable accept (POST /v1 …/messages)", async (i) => expect(await apiPost(`b${run}-${i}`, "hello"), 202));
  let sent = 0;
  const slack = await sample("Slack event ack (signed POST /slack/events)", async () => {
    const i = sent++;
    const ts = Math.floor(Date.now() / 1000);
    const body = JSON.stringify({
      type: "event_callback",
      team_id: "TBENCH",
      event_id: `Ev${run}${i}`,
      authorizations: [{ team_id: "TBENCH", user_id: "UBENCHBOT", is_bot: true }],
      event: { type: "app_mention", user: "UBENCH", text: "<@UBENCHBOT> hi", ts: `${ts}.${String(i).padStart(6, "0")}`, channel: `C${run}` },
    });
    const signature = `v0=${createHmac("sha256", SLACK_SECRET).update(`v0:${ts}:${body}`).digest("hex")}`;
    const res = await fetch(`${worker.url}/slack/events`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-slack-request-timestamp": String(ts), "x-slack-signature": signature },
      body,
    });
    await expect(res, 200);
  });
  const turn = await sample(
    "whole turn, offline model with a tool call (POST → idle)",
    async (i) => {
      const id = `t${run}-${i}`;
      await expect(await apiPost(id, "what time is it?"), 202);
      await until("the turn", async () => {
        const res = await fetch(`${worker.url}/v1/tenants/bench/agents/helper/conversations/${id}`, { headers: { authorization: `Bearer ${ADMIN}` } });
        return (await res.json()).status === "idle";
      });
    },
    TURNS,
  );

  const row = (m, base) => `${m.name.padEnd(58)} median ${m.median.toFixed(1).padStart(7)} ms  p95 ${m.p95.toFixed(1).padStart(7)} ms  = ${(m.median / base.median).toFixed(2)}× ${base === baseline ? "baseline" : "accept"}`;
  console.log(`antiproton bench (wrangler dev on loopback, ${ROUNDS} rounds each, ${TURNS} turns)`);
  console.log(row(baseline, baseline));
  console.log(row(accept, baseline));
  console.log(row(slack, baseline));
  console.log(row(turn, accept));
} finally {
  await worker.stop();
}

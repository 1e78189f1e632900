// `npm run bench`: the figures of docs/benchmarks.md, on one `wrangler dev`
// against loopback fakes (test/fakes/) that speak the real protocols. Every
// figure is printed with n, median and p99, and as a ratio against a baseline
// measured in the same run (the machine is shared and noisy; the ratio is the
// figure that carries). Sections, in order (BENCH_ONLY=busy,ack picks some):
//   busy   object busy time per turn (recorded by the runtime) as a share of the
//          turn, vs the same turn awaited inside the object
//   fleet  BENCH_FLEET agents in BENCH_FLEET/10 tenants, one message each
//   idle   alarms and invocations in the 60 s after everything settled
//   ack    Slack event ack vs a minimal @slack/bolt app, and a bare Worker request
//   stream a 2,000-word answer streamed into Slack vs a short one: the object's
//          busy time per turn does not grow with the chunks
//   load   one object: a reply's busy time with 10 vs BENCH_RUNNING running
//          conversations, and with BENCH_PAST past conversations vs fresh
//          (BENCH_HISTORY seeded through the API, the rest copied: bench/amplify.mjs)
//   script another conversation of the agent while a js__run script spins at its
//          CPU limit vs while none runs (accepted, answered), interleaved; and the
//          sandbox's countdown vs the installed QuickJS in this process (bench/countdown.mjs)
import { spawn } from "node:child_process";
import { createHmac } from "node:crypto";
import { rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { listen, sendJson } from "../test/fakes/http.mjs";
import { FAKE_PROVIDER_KEY, startModelProvider } from "../test/fakes/model-provider.mjs";
import { FAKE_SLACK_BOT_TOKEN, startSlack } from "../test/fakes/slack.mjs";
import { startWorker, until } from "../test/node/wrangler-dev.mjs";
import { amplifyHistory } from "./amplify.mjs";
import { countdownRatios } from "./countdown.mjs";
import { objectCounters } from "./counters.mjs";
import { pool, row, summary, timed, unionLength } from "./stats.mjs";

const num = (name, fallback) => Number(process.env[name] ?? fallback);
// ack leaves a backlog of turns (one per event) behind it: it runs after idle, and load starts its own wrangler dev.
const SECTIONS = ["busy", "stream", "fleet", "idle", "ack", "script", "load"];
const ONLY = process.env.BENCH_ONLY ? process.env.BENCH_ONLY.split(",").map((s) => s.trim()) : SECTIONS;
for (const s of ONLY) if (!SECTIONS.includes(s)) throw new Error(`BENCH_ONLY: unknown section ${s} (known: ${SECTIONS.join(", ")})`);

const MODEL_MS = num("BENCH_MODEL_MS", 2000);
const TOOL_MS = num("BENCH_TOOL_MS", 500);
const SLACK_MS = num("BENCH_SLACK_MS", 150);
const BUSY_TURNS = num("BENCH_BUSY_TURNS", 10);
const ACK_N = num("BENCH_ACK", 200);
const ACK_CONCURRENCY = 16;
const FLEET = num("BENCH_FLEET", 300);
const FLEET_MODEL_MS = 200;
const IDLE_S = num("BENCH_IDLE_S", 60);
const RUNNING = num("BENCH_RUNNING", 500);
const HISTORY = num("BENCH_HISTORY", 1000);
/** The past the load section measures: HISTORY seeded through the API, copied in the object's SQLite up to this. */
const PAST = num("BENCH_PAST", 100_000);
const PROBES = num("BENCH_PROBES", 10);
const STREAM_ROUNDS = num("BENCH_STREAM_ROUNDS", 5);
const SCRIPT_ROUNDS = num("BENCH_SCRIPT_ROUNDS", 10);
const SCRIPT_CPU_MS = 3_000;

const ADMIN = "bench-admin-token";
const SLACK_SECRET = "bench-slack-signing-secret";
const TEAM = "TBENCH";
const BOT = "UBENCHBOT";
const run = Date.now().toString(36);
let LOG = join(tmpdir(), `antiproton-bench-${run}.log`);

// ---- the outside world, on loopback -------------------------------------------

const provider = await startModelProvider();
// The fake Slack answers chat.postMessage and chat.update after SLACK_MS, as Slack's API does.
const slack = await startSlack({ gates: { pass: (fake) => (fake === "slack" ? sleep(SLACK_MS) : undefined), tell() {} } });
// The http tool's target: answers after TOOL_MS and records when each call was in hand.
const toolCalls = [];
const tool = await listen(async (req, res) => {
  const call = { url: req.url, start: Date.now() };
  await sleep(TOOL_MS);
  call.end = Date.now();
  toolCalls.push(call);
  sendJson(res, 200, { ok: true, path: req.url });
});

const startBenchWorker = (extra = {}, persistDir = undefined) =>
  startWorker({
    cwd: new URL("..", import.meta.url).pathname,
    persistDir,
    vars: {
      ADMIN_TOKEN: ADMIN,
      MODEL_PROVIDERS: JSON.stringify([{ id: "fake", baseUrl: `${provider.url}/v1`, auth: { secret: "FAKE_PROVIDER_KEY" } }]),
      HARNESS_MODEL: "fake/test-model",
      FAKE_PROVIDER_KEY,
      MOUNTS: JSON.stringify([
        { alias: "api", plugin: "http", config: { allowedHosts: [new URL(tool.url).host] } },
        { alias: "clock", plugin: "clock" },
      ]),
      SLACK_SIGNING_SECRET: SLACK_SECRET,
      SLACK_BOT_TOKEN: FAKE_SLACK_BOT_TOKEN,
      SLACK_API_BASE_URL: `${slack.url}/api`,
      ...extra,
    },
  });
/** The `wrangler dev` the requests go to (the load section starts its own). */
let worker = await startBenchWorker();

// A run stopped from outside (Ctrl-C, a timeout) takes wrangler dev and workerd with it.
for (const signal of ["SIGINT", "SIGTERM"]) {
  process.once(signal, async () => {
    writeFileSync(LOG, worker.output());
    await worker.stop();
    process.exit(130);
  });
}

// wrangler dev's own log, kept on disk as the run goes (a run cut short keeps it).
const saveLog = setInterval(() => writeFileSync(LOG, worker.output()), 5_000);
saveLog.unref();

// ---- helpers -------------------------------------------------------------------

async function expectStatus(res, status) {
  if (res.status !== status) throw new Error(`${res.url}: expected ${status}, got ${res.status} ${await res.text()}`);
  return res.json().catch(() => null);
}

/**
 * wrangler dev's proxy answers 503 "Your worker restarted mid-request" (retry-after: 0) when
 * its connection to workerd drops under load, and retries only GET and HEAD itself. A client
 * sends the same request again, as Slack does with an event; the Agents API's Idempotency-Key
 * and Slack's message ts make the second copy collapse into the first. Counted in the output.
 */
const retried = { count: 0 };
async function resending(send) {
  for (let attempt = 1; ; attempt++) {
    const res = await send();
    if (res.status !== 503 || attempt === 5) return res;
    retried.count++;
    await res.arrayBuffer();
    await sleep(200 * attempt);
  }
}

const api = (path, init = {}) =>
  fetch(`${worker.url}/v1${path}`, { ...init, headers: { authorization: `Bearer ${ADMIN}`, "content-type": "application/json", ...init.headers } });
const post = async (tenant, agent, conversation, text) => {
  const key = crypto.randomUUID();
  const send = () => api(`/tenants/${tenant}/agents/${agent}/messages`, { method: "POST", headers: { "idempotency-key": key }, body: JSON.stringify({ text, conversation }) });
  return expectStatus(await resending(send), 202);
};
const view = async (tenant, agent, conversation) =>
  expectStatus(await api(`/tenants/${tenant}/agents/${agent}/conversations/${encodeURIComponent(conversation)}`), 200);
const control = (path, method = "GET", body) => fetch(`${provider.url}/_control${path}`, { method, body: body && JSON.stringify(body) }).then((r) => r.json());
const putScenario = (id, steps, by = "order") => control(`/scenarios/${id}`, "PUT", { steps, by });
const lastAssistant = (v) => v.transcript.findLast((e) => e.role === "assistant");

/** Waits until the conversation's turn `turn` has ended and its reply is in the transcript. */
const settled = (tenant, agent, conversation, turn = 1, timeoutMs = 300_000) =>
  until(
    `${conversation} to answer turn ${turn}`,
    async () => {
      const v = await view(tenant, agent, conversation);
      return v.turn >= turn && (v.status === "idle" || v.status === "failed") && lastAssistant(v)?.text ? v : undefined;
    },
    timeoutMs,
  );

let ts = Math.floor(Date.now() / 1000) * 1_000_000;
const nextTs = () => {
  ts += 1;
  return `${Math.floor(ts / 1_000_000)}.${String(ts % 1_000_000).padStart(6, "0")}`;
};

/** A signed Events API app_mention (or, `mention: false`, a channel message not for the agent), as Slack sends it. */
function slackRequest(url, { channel, ts: messageTs, threadTs, text, mention = true, team = TEAM }) {
  const now = Math.floor(Date.now() / 1000);
  const body = JSON.stringify({
    type: "event_callback",
    team_id: team,
    api_app_id: "ABENCH",
    event_id: `Ev${run}${messageTs.replace(".", "")}`,
    event_time: now,
    authorizations: [{ team_id: team, user_id: BOT, is_bot: true, is_enterprise_install: false }],
    event: { type: mention ? "app_mention" : "message", channel_type: "channel", user: "UBENCH", text: mention ? `<@${BOT}> ${text}` : text, ts: messageTs, ...(threadTs ? { thread_ts: threadTs } : {}), channel, event_ts: messageTs },
  });
  const signature = `v0=${createHmac("sha256", SLACK_SECRET).update(`v0:${now}:${body}`).digest("hex")}`;
  const send = () =>
    fetch(`${url}/slack/events`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-slack-request-timestamp": String(now), "x-slack-signature": signature },
      body,
    });
  return resending(send);
}

const out = [];
const print = (line = "") => {
  out.push(line);
  console.log(line);
};
const ratio = (x, base) => x / base;

// ---- 1. busy: object busy time per turn --------------------------------------------

async function busySection() {
  const sid = `busy${run}`;
  const steps = [];
  for (let k = 0; k < BUSY_TURNS; k++) {
    const get = (n) => ({ name: "api__get", arguments: { url: `${tool.url}/slow?turn=${k}&call=${n}` } });
    steps.push({ delayMs: MODEL_MS, toolCalls: [get(1), get(2)] }, { delayMs: MODEL_MS, text: `turn ${k} done` });
  }
  await putScenario(sid, steps, "position");
  const channel = `CBUSY${run.toUpperCase()}`;
  const threadTs = nextTs();
  const conversation = `${TEAM}:${channel}:${threadTs}`;
  const shares = [];
  const factors = [];
  const walls = [];
  const busy = [];
  const awaited = [];
  for (let k = 0; k < BUSY_TURNS; k++) {
    const t0 = Date.now();
    await expectStatus(await slackRequest(worker.url, { channel, ts: k === 0 ? threadTs : nextTs(), threadTs: k === 0 ? undefined : threadTs, text: `[s:${sid}] turn ${k}` }), 200);
    await until(`busy turn ${k}`, async () => {
      const v = await view(TEAM, "assistant", conversation);
      const replied = (await fetch(`${slack.url}/_control/calls?channel=${channel}&method=chat.postMessage`).then((r) => r.json())).some((c) => c.body.text?.includes(`turn ${k} done`));
      return v.status === "idle" && v.turn === k + 1 && replied;
    }, 60_000);
    await sleep(500); // the status message's last update and the reports that follow the reply
    const v = await view(TEAM, "assistant", conversation);
    const turnBusy = v.busyByTurn.find((t) => t.turn === v.turn).busyMs;
    const slackCalls = (await fetch(`${slack.url}/_control/calls?channel=${channel}`).then((r) => r.json())).filter((c) => c.at >= t0);
    const modelCalls = (await control(`/scenarios/${sid}/requests`)).filter((r) => r.at >= t0);
    const end = Math.max(...slackCalls.map((c) => c.at + SLACK_MS));
    // The waits a turn awaited inside the object would spend in the object: every outside call, overlaps once.
    const outside = unionLength([
      ...modelCalls.map((r) => [r.at, r.at + MODEL_MS]),
      ...toolCalls.filter((c) => c.start >= t0).map((c) => [c.start, c.end]),
      ...slackCalls.map((c) => [c.at, c.at + SLACK_MS]),
    ]);
    const wall = end - t0;
    walls.push(wall);
    busy.push(turnBusy);
    awaited.push(turnBusy + outside);
    shares.push((100 * turnBusy) / wall);
    factors.push(ratio(turnBusy + outside, turnBusy));
  }
  const share = summary(shares);
  const factor = summary(factors, { higherIsBetter: true });
  print(`busy: a ${BUSY_TURNS}-turn Slack conversation; per turn two ${MODEL_MS} ms model calls, two http tool calls of ${TOOL_MS} ms, Slack answering in ${SLACK_MS} ms`);
  print(row("turn wall clock (event POST → last Slack answer)", summary(walls), "ms"));
  print(row("object busy time per turn (runtime's busyByTurn)", summary(busy), "ms"));
  print(row("baseline: the turn awaited inside the object", summary(awaited), "ms"));
  print(row("object busy, share of the turn", share, "%", undefined, { text: "≤ 2 % (median)", met: share.median <= 2 }));
  print(row("awaited baseline ÷ object busy", factor, "x", undefined, { text: "≥ 50× (median)", met: factor.median >= 50 }));
}

// ---- stream: busy time of a long streamed answer vs a short one --------------------

async function streamSection() {
  // About 2,000 tokens, written 20 characters at a time, 20 ms apart: ~390 chunks over ~8 s.
  const long = Array.from({ length: 2000 }, (_, i) => `w${i % 97}`).join(" ");
  const kinds = { short: { text: "A short answer." }, streamed: { text: long, argumentChunk: 20, chunkDelayMs: 20 } };
  const busy = { short: [], streamed: [] };
  const appends = [];
  for (let i = 0; i < STREAM_ROUNDS; i++) {
    for (const [name, step] of Object.entries(kinds)) {
      const sid = `stream${name}${run}${i}`;
      await putScenario(sid, [step], "position");
      const channel = `CSTREAM${run.toUpperCase()}${i}`;
      const threadTs = nextTs();
      await expectStatus(await slackRequest(worker.url, { channel, ts: threadTs, text: `[s:${sid}] go` }), 200);
      await settled(TEAM, "assistant", `${TEAM}:${channel}:${threadTs}`);
      await sleep(500); // the reply's finishing send and its report
      const v = await view(TEAM, "assistant", `${TEAM}:${channel}:${threadTs}`);
      busy[name].push(v.busyByTurn.find((t) => t.turn === 1).busyMs);
      if (name === "streamed") appends.push((await fetch(`${slack.url}/_control/calls?channel=${channel}&method=chat.appendStream`).then((r) => r.json())).length);
    }
  }
  const [short, streamed] = [summary(busy.short), summary(busy.streamed)];
  print(`stream: a ~2,000-token answer streamed into a Slack thread (${long.length} characters in ~${Math.ceil(long.length / 20)} chunks) vs a one-line answer, ${STREAM_ROUNDS} each`);
  print(row("Slack appendStream calls per streamed answer", summary(appends), ""));
  print(row("object busy per turn, short answer", short, "ms"));
  print(row("object busy per turn, streamed answer", streamed, "ms", `${ratio(streamed.median, short.median).toFixed(2)}×`, { text: "within 1.5× (median)", met: streamed.median <= 1.5 * short.median }));
}

// ---- 2. ack: Slack event ack vs @slack/bolt, and a bare request -------------------

function startBolt() {
  const child = spawn(process.execPath, [new URL("./bolt-app.mjs", import.meta.url).pathname, SLACK_SECRET], { stdio: ["ignore", "pipe", "inherit"] });
  return new Promise((resolve, reject) => {
    let text = "";
    child.stdout.on("data", (d) => {
      text += d;
      const url = /ready (\S+)/.exec(text)?.[1];
      if (url) resolve({ url, stop: () => child.kill() });
    });
    child.on("exit", (code) => reject(new Error(`the bolt app exited (${code})`)));
  });
}

/** Latencies of `request()`: ACK_N one after another, then ACK_N at ACK_CONCURRENCY at once. */
async function latencies(request) {
  for (let i = 0; i < 10; i++) await request(); // warm-up: first compile, first object
  const sequential = [];
  for (let i = 0; i < ACK_N; i++) sequential.push(await timed(request));
  const concurrent = await pool(ACK_N, ACK_CONCURRENCY, () => timed(request));
  return { sequential: summary(sequential), concurrent: summary(concurrent) };
}

async function ackSection() {
  const sid = `ack${run}`;
  await putScenario(sid, [{ text: "ack answer" }]);
  const bolt = await startBolt();
  try {
    // Spread over ACK_CONCURRENCY workspaces (one agent object each), every event a new thread and a turn.
    let sent = 0;
    const event = (url, mention = true) => async () => {
      const team = `TACK${sent++ % ACK_CONCURRENCY}`;
      const res = await slackRequest(url, { team, channel: `CACK${run.toUpperCase()}`, ts: nextTs(), text: `[s:${sid}] hello`, mention });
      if (res.status !== 200) throw new Error(`${url}: ack ${res.status} ${await res.text()}`);
      await res.arrayBuffer();
    };
    const floor = await latencies(async () => {
      const res = await fetch(`${worker.url}/`);
      if (!res.ok) throw new Error(`GET / ${res.status}`);
      await res.arrayBuffer();
    });
    const boltAck = await latencies(event(bolt.url));
    const boltEvents = sent;
    const ours = await latencies(event(worker.url));
    const turns = sent - boltEvents;
    const verifyOnly = await latencies(event(worker.url, false));
    const started = (await control(`/scenarios/${sid}/requests`)).length;
    print(`ack: signed event_callback (app_mention) on loopback, ${ACK_N} sequential and ${ACK_N} at concurrency ${ACK_CONCURRENCY}; ours accepts each durably (a new turn per event, over ${ACK_CONCURRENCY} workspaces); ${started} of its ${turns} turns had reached the model when the section ended`);
    for (const mode of ["sequential", "concurrent"]) {
      const label = mode === "sequential" ? "sequential" : `concurrency ${ACK_CONCURRENCY}`;
      const r = (a, b) => `ours/bolt p50 ${(a.median / b.median).toFixed(2)}×, p99 ${(a.p99 / b.p99).toFixed(2)}×`;
      print(row(`floor: bare Worker GET /, ${label}`, floor[mode], "ms"));
      print(row(`baseline: @slack/bolt HTTPReceiver ack, ${label}`, boltAck[mode], "ms", `${(boltAck[mode].median / floor[mode].median).toFixed(2)}× floor`));
      print(row(`ours: /slack/events ack, ${label}`, ours[mode], "ms", `${r(ours[mode], boltAck[mode])}; ${(ours[mode].median / floor[mode].median).toFixed(2)}× floor`));
      print(row(`ours, a message not for the agent (verify only)`, verifyOnly[mode], "ms", `${r(verifyOnly[mode], boltAck[mode])}; ${(verifyOnly[mode].median / floor[mode].median).toFixed(2)}× floor`));
    }
  } finally {
    bolt.stop();
  }
}

// ---- 3. fleet: many agents, one message each ------------------------------------------

async function fleetSection() {
  await control("/unscripted", "PUT", { delayMs: FLEET_MODEL_MS });
  const tenants = Math.max(1, Math.round(FLEET / 10));
  const agents = Array.from({ length: FLEET }, (_, i) => ({ tenant: `fleet${run}-${i % tenants}`, agent: `agent-${Math.floor(i / tenants)}`, text: `hello ${i}` }));
  // Baseline: one turn alone, on an agent of its own, a few times.
  const single = [];
  for (let i = 0; i < 5; i++) {
    const start = Date.now();
    await post(`fleetbase${run}`, `solo${i}`, "c", "hello alone");
    await settled(`fleetbase${run}`, `solo${i}`, "c");
    single.push(Date.now() - start);
  }
  // The fleet's messages name one scenario, so the provider's record says when every call has come in.
  const sid = `fleet${run}`;
  await putScenario(sid, [{ delayMs: FLEET_MODEL_MS, text: "fleet answer" }]);
  await control("/concurrency", "POST");
  const start = Date.now();
  const sent = await pool(FLEET, 16, async (i) => post(agents[i].tenant, agents[i].agent, "c", `[s:${sid}] ${agents[i].text}`).then(() => true, () => false));
  const accepted = Date.now();
  const calls = async () => (await control(`/scenarios/${sid}/requests`)).length;
  const deadline = Date.now() + 15 * 60_000;
  for (let seen = 0; (seen = await calls()) < sent.filter(Boolean).length && Date.now() < deadline; ) {
    console.error(`  fleet: the provider has had ${seen} of ${FLEET} calls after ${((Date.now() - start) / 1000).toFixed(0)} s`);
    await sleep(2000);
  }
  // Then each conversation is read until its answer is in (a call answered is reported back within moments).
  const answered = new Map();
  while (answered.size < sent.filter(Boolean).length && Date.now() < deadline) {
    const waiting = agents.map((a, i) => i).filter((i) => sent[i] && !answered.has(i));
    await pool(waiting.length, 8, async (k) => {
      const i = waiting[k];
      const v = await view(agents[i].tenant, agents[i].agent, "c").catch(() => null);
      if (v && v.status !== "running" && v.status !== "waiting_model" && lastAssistant(v)) answered.set(i, { v, at: lastAssistant(v).at });
    });
    if (answered.size < FLEET) {
      console.error(`  fleet: ${answered.size} of ${FLEET} answered after ${((Date.now() - start) / 1000).toFixed(0)} s`);
      await sleep(1000);
    }
  }
  const { max } = await control("/concurrency");
  const right = [...answered].filter(([i, { v }]) => v.status === "idle" && lastAssistant(v).text === "fleet answer" && v.transcript[0].text.endsWith(agents[i].text)).length;
  const end = Math.max(...[...answered.values()].map((a) => a.at));
  const seconds = (end - start) / 1000;
  const singleS = summary(single);
  const serial = (FLEET * singleS.median) / 1000;
  print(`fleet: ${FLEET} agents in ${tenants} tenants, one message each (Agents API), provider answering in ${FLEET_MODEL_MS} ms`);
  print(row("baseline: one turn alone (POST → answered)", singleS, "ms"));
  print(row("accepted (202) / sent", { value: sent.filter(Boolean).length }, `of ${FLEET}`));
  print(row("answered right / lost", { value: right }, `of ${FLEET}, ${FLEET - answered.size} lost, ${answered.size - right} wrong or failed`, undefined, { text: "all answered, none lost", met: right === FLEET }));
  print(row("all accepted in", { value: (accepted - start) / 1000 }, "s"));
  print(row("first POST → last answer", { value: seconds }, "s", `= ${(FLEET / seconds).toFixed(1)} turns/s; ${(serial / seconds).toFixed(1)}× faster than one at a time (${serial.toFixed(0)} s)`));
  print(row("provider: most requests in flight at once", { value: max }, "", undefined, { text: "well above 1", met: max > 10 }));
}

// ---- 4. idle: alarms and invocations once everything settled ------------------------------

/** Request and queue-batch lines wrangler dev logs: every invocation from outside. */
const invocationLines = () => worker.output().split("\n").filter((l) => /\b(GET|POST|PUT|DELETE|PATCH) \/|QUEUE /.test(l)).length;

async function idleSection() {
  // Settled: nothing armed anywhere and no object's counters moving for 5 s.
  let before;
  await until("every object to settle", async () => {
    const a = objectCounters(worker.persistDir);
    await sleep(5_000);
    const b = objectCounters(worker.persistDir);
    before = b;
    return b.armed === 0 && a.passes === b.passes && a.handlers === b.handlers;
  }, 5 * 60_000);
  const logged = invocationLines();
  await sleep(IDLE_S * 1000);
  const after = objectCounters(worker.persistDir);
  const alarms = after.passes - before.passes;
  const invocations = after.handlers - before.handlers + (invocationLines() - logged);
  print(`idle: ${IDLE_S} s after every object settled (${after.objects.AgentObject ?? 0} agent objects, ${after.objects.Courier ?? 0} couriers on disk)`);
  print(row("baseline: passes (alarms) so far in the run", { value: before.passes }, "", `handler calls ${before.handlers}`));
  print(row("alarms armed at the start of the idle minute", { value: before.armed }, "", `(${after.armed} at its end)`));
  print(row(`alarms run in the idle ${IDLE_S} s`, { value: alarms }, "", undefined, { text: "0", met: alarms === 0 && after.armed === 0 }));
  print(row(`invocations in the idle ${IDLE_S} s`, { value: invocations }, "", undefined, { text: "0", met: invocations === 0 }));
}

// ---- 5. script: a script computing at its limit does not hold up its agent ------------------

async function scriptSection() {
  const tenant = `script${run}`;
  const agent = "coder";
  await expectStatus(await api(`/tenants/${tenant}/agents/${agent}/mounts`, { method: "PUT", body: JSON.stringify([{ alias: "js", plugin: "js", config: { cpuMs: SCRIPT_CPU_MS } }]) }), 200);
  const pingSid = `scriptping${run}`;
  await putScenario(pingSid, [{ text: "pong" }]);
  /** Another conversation of the agent: POST → 202, and POST → its answer in the transcript. */
  const ping = async (conversation) => {
    const start = performance.now();
    await post(tenant, agent, conversation, `[s:${pingSid}] ping`);
    const accepted = performance.now() - start;
    const answer = await until(`${conversation} answered`, async () => (await view(tenant, agent, conversation)).transcript.find((e) => e.role === "assistant" && e.text === "pong"));
    return { accepted, answered: performance.now() - start, answeredAt: answer.at };
  };
  const quiet = { accepted: [], answered: [] };
  const spinning = { accepted: [], answered: [] };
  let during = 0;
  for (let i = 0; i < SCRIPT_ROUNDS; i++) {
    const q = await ping(`quiet-${i}`);
    quiet.accepted.push(q.accepted);
    quiet.answered.push(q.answered);
    // A script that calls a tool (so the bench knows when it runs), then computes until its CPU limit.
    const marker = `/script-${run}-${i}`;
    const code = `(async () => { await tools.api.get({ url: "${tool.url}${marker}" }); for (;;) {} })()`;
    const sid = `spin${run}${i}`;
    await putScenario(sid, [{ toolCalls: [{ name: "js__run", arguments: { code } }] }, { text: "spun" }], "position");
    await post(tenant, agent, `spin-${i}`, `[s:${sid}] spin`);
    await until("the script's tool call", async () => toolCalls.some((c) => c.url === marker) || undefined);
    await sleep(200); // the answer reported, handed back, and the script into its loop
    const s = await ping(`during-${i}`);
    spinning.accepted.push(s.accepted);
    spinning.answered.push(s.answered);
    const spun = await settled(tenant, agent, `spin-${i}`, 1, 120_000);
    const result = spun.transcript.find((e) => e.role === "tool");
    if (!result?.text.startsWith("CPU time limit")) throw new Error(`spin-${i}: ${result?.text}`);
    // Answered while the script still ran: its result came after the ping's answer.
    if (result.at > s.answeredAt) during++;
  }
  const [qa, sa, qd, sd] = [summary(quiet.accepted), summary(spinning.accepted), summary(quiet.answered), summary(spinning.answered)];
  print(`script: another conversation of the agent while a js__run script spins at its CPU limit (${SCRIPT_CPU_MS} ms) vs while none runs, ${SCRIPT_ROUNDS} each, interleaved`);
  print(row("baseline: accepted (POST → 202), no script running", qa, "ms"));
  print(row("accepted while a script spins", sa, "ms", `${ratio(sa.median, qa.median).toFixed(2)}× (median), ${ratio(sa.p99, qa.p99).toFixed(2)}× (p99)`, { text: "every one under 1 s", met: sa.p99 < 1_000 }));
  print(row("baseline: answered (POST → reply), no script running", qd, "ms"));
  print(row("answered while a script spins", sd, "ms", `${ratio(sd.median, qd.median).toFixed(2)}×; ${during} of ${SCRIPT_ROUNDS} before the script was stopped`, { text: "all before the script ended", met: during === SCRIPT_ROUNDS }));
  const countdown = await countdownRatios(SCRIPT_ROUNDS);
  print(`  the sandbox's countdown (scripts/slice-quickjs.mjs) vs the installed QuickJS, in this Node process without pauses, ${SCRIPT_ROUNDS} rounds each, interleaved`);
  for (const [name, { ratios, stockMs }] of Object.entries(countdown)) print(row(`sliced / stock: ${name}`, summary(ratios), "x", `stock ${summary(stockMs).median.toFixed(0)} ms`));
}

// ---- 6. load: one object under load, and with a long past -------------------------------

/** The object's busy time for one reply (a fresh conversation, the provider answering at once), PROBES times. */
async function probe(tenant, agent, tag) {
  const busy = [];
  for (let i = 0; i < PROBES; i++) {
    const id = `probe-${tag}-${i}`;
    await post(tenant, agent, id, "hello");
    const v = await settled(tenant, agent, id);
    busy.push(v.busyByTurn.find((t) => t.turn === v.turn).busyMs);
  }
  return summary(busy);
}

async function loadSection() {
  // Its own wrangler dev, with a lease longer than the held calls (the default 30 s would
  // send each held call's effect again, and fail its turn after three leases).
  writeFileSync(LOG, worker.output());
  await worker.stop();
  LOG = join(tmpdir(), `antiproton-bench-${run}-load.log`);
  worker = await startBenchWorker({ EFFECT_LEASE_SECONDS: "600" });
  await control("/unscripted", "PUT", { delayMs: 0 });
  const tenant = `load${run}`;
  const held = `held${run}`;
  await putScenario(held, [{ hold: true }]);
  const holding = async (count) => (await control(`/scenarios/${held}/requests`)).length >= count;
  const startHeld = async (from, to) => {
    await pool(to - from, 16, (k) => post(tenant, "one", `held-${from + k}`, `[s:${held}] wait ${from + k}`));
    await until(`${to} model calls held at the provider`, async () => (await holding(to)) || void (await sleep(2000)), 10 * 60_000);
  };
  await startHeld(0, 10);
  const few = await probe(tenant, "one", "few");
  const started = Date.now();
  await startHeld(10, RUNNING);
  const startedS = (Date.now() - started) / 1000;
  const many = await probe(tenant, "one", "many");
  await pool(RUNNING, 32, () => control(`/scenarios/${held}/release`, "POST"));
  print(`load: one object; a reply's busy time (runtime's busyByTurn), ${PROBES} replies each`);
  print(row(`baseline: with 10 conversations running`, few, "ms"));
  print(row(`with ${RUNNING} conversations running`, many, "ms", `${ratio(many.median, few.median).toFixed(2)}× (started in ${startedS.toFixed(0)} s)`, { text: "within 2× (median)", met: many.median <= 2 * few.median }));

  // A long past: HISTORY conversations of one turn with a tool call (two model jobs each), seeded through the Agents API.
  const seed = `seed${run}`;
  await putScenario(seed, [{ toolCalls: [{ name: "clock__now", arguments: {} }] }, { text: "seeded" }], "position");
  const seeding = Date.now();
  await pool(HISTORY, 16, (i) => post(tenant, "old", `past-${i}`, `[s:${seed}] past ${i}`));
  await until("the past conversations to settle", async () => (await control(`/scenarios/${seed}/requests`)).length >= 2 * HISTORY || void (await sleep(2000)), 30 * 60_000);
  const notDone = (await pool(HISTORY, 16, (i) => view(tenant, "old", `past-${i}`))).filter((v) => v.status !== "idle").length;
  if (notDone > 0) await until("the last past conversations", async () => (await view(tenant, "old", `past-${HISTORY - 1}`)).status === "idle");
  const seedS = (Date.now() - seeding) / 1000;
  // The rest of the past is copied in the object's SQLite, with wrangler dev stopped (killed: its state stays).
  let past = { conversations: HISTORY, model_jobs: 2 * HISTORY };
  if (PAST > HISTORY) {
    const state = worker.persistDir;
    await worker.kill();
    past = amplifyHistory(state, "past-", PAST);
    worker = await startBenchWorker({ EFFECT_LEASE_SECONDS: "600" }, state);
    stateToRemove = state;
  }
  const old = await probe(tenant, "old", "old");
  const fresh = await probe(tenant, "fresh", "fresh");

  const seeded = `${HISTORY} seeded through the API in ${seedS.toFixed(0)} s (${(HISTORY / seedS).toFixed(0)} conversations/s)${PAST > HISTORY ? `, copied in the object's SQLite up to ${past.conversations} (bench/amplify.mjs)` : ""}`;
  print(`  past: ${past.conversations} conversations and ${past.model_jobs} model jobs in the object (${seeded})${notDone ? `; ${notDone} were still running after the provider's last answer` : ""}`);
  print(row("baseline: a fresh object", fresh, "ms"));
  print(row(`an object holding ${past.conversations} past conversations`, old, "ms", `${ratio(old.median, fresh.median).toFixed(2)}×`, { text: "within 1.5× (median)", met: old.median <= 1.5 * fresh.median }));
}
/** A state folder kept across a restart is removed at the end (startWorker removes only those it made). */
let stateToRemove;

// ---- run ------------------------------------------------------------------------

const sectionRetries = () => {
  const n = retried.count;
  retried.count = 0;
  return n;
};

const sections = { busy: busySection, stream: streamSection, ack: ackSection, fleet: fleetSection, idle: idleSection, script: scriptSection, load: loadSection };
const began = Date.now();
try {
  print(`antiproton bench — wrangler dev on loopback, fakes for Slack and the provider; ${new Date().toISOString()}; sections: ${ONLY.join(", ")}`);
  for (const name of SECTIONS) {
    if (!ONLY.includes(name)) continue;
    const t = Date.now();
    await sections[name]();
    print(`  (${name}: ${((Date.now() - t) / 1000).toFixed(0)} s; requests sent again after wrangler dev's 503 "worker restarted mid-request": ${sectionRetries()})`);
    print();
  }
  print(`total ${((Date.now() - began) / 1000).toFixed(0)} s`);
} catch (err) {
  console.error(`wrangler dev's last words:\n${worker.output().slice(-4000)}`);
  throw err;
} finally {
  writeFileSync(LOG, worker.output());
  console.log(`wrangler dev's log: ${LOG}`);
  await worker.stop();
  if (stateToRemove) rmSync(stateToRemove, { recursive: true, force: true });
  await Promise.all([provider.close(), slack.close(), tool.close()]);
}

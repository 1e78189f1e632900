// `npm run bench`: the figures of docs/benchmarks.md, on one `wrangler dev`
// against loopback fakes (test/fakes/) that speak the real protocols. Every
// figure is printed with n, median and p99, and as a ratio against a baseline
// measured in the same run (the machine is shared and noisy; the ratio is the
// figure that carries). Sections, in order (BENCH_ONLY=busy,ack picks some):
//   bundle the deployed Worker's size (raw, gzip) and its startup in workerd vs the Worker
//          before it was made lean, built in the same run (bench/bundle.mjs); needs no wrangler dev
//   busy   object busy time per turn (recorded by the runtime) as a share of the
//          turn, vs the same turn awaited inside the object; over the batch, the
//          object's own total and the workerd processes' CPU time (/proc)
//   fleet  BENCH_FLEET agents in BENCH_FLEET/10 tenants, one message each
//   idle   alarms and invocations in the 60 s after everything settled
//   peer   our Slack turn vs the Vercel Chat SDK's (bench/chat-sdk-app.mjs), interleaved:
//          event → reply beyond the floor, ack, Slack calls and CPU per turn, sequential
//          and 16 at once (each in a channel of its own, then every thread in one channel);
//          calls into the agent object per turn; with BENCH_BURST, a burst
//          of app_mentions over BENCH_BURST_TEAMS workspaces sent all at once
//   discord our Discord turn vs the Chat SDK's Discord adapter (bench/discord.mjs), interleaved:
//          16 conversations at once, each a thread of ONE channel (issue 40), and ours over 16 channels;
//          event → reply beyond the floor, Discord calls and CPU per turn
//   ack    Slack event ack vs a minimal @slack/bolt app, and a bare Worker request
//   stream a 2,000-word answer streamed into Slack vs a short one: the object's
//          busy time per turn does not grow with the chunks
//   tail   one conversation to turn BENCH_TAIL_TURNS (compacting on the way) vs a young
//          one, interleaved: busy and latency of turn ~200 as ratios to turn ~10's (bench/tail.mjs)
//   load   one object: a reply's busy time with 10 vs BENCH_RUNNING running
//          conversations, and with BENCH_PAST past conversations vs fresh
//          (BENCH_HISTORY seeded through the API, the rest copied: bench/amplify.mjs)
//   script another conversation of the agent while a js__run script spins at its
//          CPU limit vs while none runs (accepted, answered), interleaved; and the
//          sandbox's countdown vs the installed QuickJS in this process (bench/countdown.mjs)
//   scale  calls into Durable Objects per plain turn by object class, into objects shared by all
//          tenants (on a turn's way; background spend reports apart), and the hottest object's share
//          of them, at two tenant counts (BENCH_SCALE_TENANTS, 20,100), and a busy shape (the smaller
//          count's tenants, BENCH_SCALE_BUSY_TURNS=5 turns each in a row), on its own wrangler dev
//          that counts them (bench/scale.mjs; docs/scale.md)
import { spawn } from "node:child_process";
import { createHmac } from "node:crypto";
import { rmSync, writeFileSync } from "node:fs";
import { cpus, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { listen, sendJson } from "../test/fakes/http.mjs";
import { FAKE_PROVIDER_KEY, startModelProvider } from "../test/fakes/model-provider.mjs";
import { FAKE_SLACK_BOT_TOKEN, startSlack } from "../test/fakes/slack.mjs";
import { DISCORD_APPLICATION_ID, DISCORD_BOT_TOKEN, DISCORD_PUBLIC_KEY, startDiscord } from "../test/fakes/discord.mjs";
import { startWorker, until } from "../test/node/wrangler-dev.mjs";
import { amplifyHistory } from "./amplify.mjs";
import { bundleSection } from "./bundle.mjs";
import { armedAlarms, objectCounters } from "./counters.mjs";
import { countdownRatios } from "./countdown.mjs";
import { discordSection } from "./discord.mjs";
import { objectBusy } from "./object-busy.mjs";
import { cpuMs, cpuOf, listeningPorts, workerdOf } from "./proc.mjs";
import { profiler, untrace } from "./devtools.mjs";
import { pool, row, summary, timed, unionLength } from "./stats.mjs";
import { SCALE_VARS, scaleSection } from "./scale.mjs";
import { TAIL_MODEL, TAIL_WINDOW, tailSection } from "./tail.mjs";

const num = (name, fallback) => Number(process.env[name] ?? fallback);
// ack leaves a backlog of turns (one per event) behind it: it runs after idle and peer, and load and scale start their own wrangler dev.
const SECTIONS = ["bundle", "busy", "stream", "tail", "fleet", "idle", "peer", "discord", "ack", "script", "load", "scale"];
const ONLY = process.env.BENCH_ONLY ? process.env.BENCH_ONLY.split(",").map((s) => s.trim()) : SECTIONS;
for (const s of ONLY) if (!SECTIONS.includes(s)) throw new Error(`BENCH_ONLY: unknown section ${s} (known: ${SECTIONS.join(", ")})`);

const MODEL_MS = num("BENCH_MODEL_MS", 2000);
const TOOL_MS = num("BENCH_TOOL_MS", 500);
const SLACK_MS = num("BENCH_SLACK_MS", 150);
const DISCORD_MS = num("BENCH_DISCORD_MS", 150);
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
const PEER_MODEL_MS = num("BENCH_PEER_MODEL_MS", 1000);
const PEER_SEQUENTIAL = num("BENCH_PEER_SEQUENTIAL", 30);
const PEER_CONCURRENT = num("BENCH_PEER_CONCURRENT", 256);
const PEER_WIDTH = 16;
const PEER_TOOL_TURNS = num("BENCH_PEER_TOOL_TURNS", 10);
/** Rounds of PEER_WIDTH conversations at once with every thread in one channel (a new channel each round). */
const PEER_ONE_CHANNEL_ROUNDS = num("BENCH_PEER_ONE_CHANNEL_ROUNDS", 4);
/** The burst is off by default (1–5 minutes more on this box): issue 22's is BENCH_BURST=200. */
const BURST = num("BENCH_BURST", 0);
const BURST_TEAMS = num("BENCH_BURST_TEAMS", 10);
/** How many of the burst's events are in flight at once (0: all). */
const BURST_WIDTH = num("BENCH_BURST_WIDTH", 0);
const SCRIPT_ROUNDS = num("BENCH_SCRIPT_ROUNDS", 10);
const SCRIPT_CPU_MS = 3_000;

const ADMIN = "bench-admin-token";
const SLACK_SECRET = "bench-slack-signing-secret";
const DISCORD_GATEWAY_SECRET = "bench-discord-gateway-secret";
const TEAM = "TBENCH";
const BOT = "UBENCHBOT";
const run = Date.now().toString(36);
let LOG = join(tmpdir(), `antiproton-bench-${run}.log`);

// ---- the outside world, on loopback -------------------------------------------

const provider = await startModelProvider();
/** Told of each Slack write (post, update, stream) when the fake Slack answers it: (call, answeredAt). */
const slackAnswers = new Set();
// The fake Slack answers chat.postMessage and chat.update after SLACK_MS, as Slack's API does.
const slack = await startSlack({
  gates: {
    async pass(fake, call) {
      if (fake !== "slack") return;
      await sleep(SLACK_MS);
      const at = Date.now();
      for (const told of slackAnswers) told(call, at);
    },
    tell() {},
  },
});
/** Told of each call the fake Discord answers: (call, answeredAt). */
const discordAnswers = new Set();
// The fake Discord answers every call after DISCORD_MS.
const discord = await startDiscord({
  async answering(call) {
    await sleep(DISCORD_MS);
    const at = Date.now();
    for (const told of discordAnswers) told(call, at);
  },
});
// The http tool's target: answers after TOOL_MS and records when each call was in hand.
const toolCalls = [];
const tool = await listen(async (req, res) => {
  const call = { url: req.url, start: Date.now() };
  await sleep(TOOL_MS);
  call.end = Date.now();
  toolCalls.push(call);
  sendJson(res, 200, { ok: true, path: req.url });
});

/** Our `wrangler dev`, its devtools Network tracing off (bench/devtools.mjs). */
const startBenchWorker = async (extra = {}, persistDir = undefined) => {
  const started = await startWorker({
    cwd: new URL("..", import.meta.url).pathname,
    persistDir,
    // Killed and overloaded on purpose: the benchmark reports figures, not what workerd logged.
    allowUncaught: true,
    vars: {
      ADMIN_TOKEN: ADMIN,
      MODEL_PROVIDERS: JSON.stringify([{ id: "fake", baseUrl: `${provider.url}/v1`, auth: { secret: "FAKE_PROVIDER_KEY" }, models: { "test-model": {}, [TAIL_MODEL]: { contextWindow: TAIL_WINDOW } } }]),
      HARNESS_MODEL: "fake/test-model",
      FAKE_PROVIDER_KEY,
      MOUNTS: JSON.stringify([
        { alias: "api", plugin: "http", config: { allowedHosts: [new URL(tool.url).host] } },
        { alias: "clock", plugin: "clock" },
      ]),
      SLACK_SIGNING_SECRET: SLACK_SECRET,
      SLACK_BOT_TOKEN: FAKE_SLACK_BOT_TOKEN,
      SLACK_API_BASE_URL: `${slack.url}/api`,
      DISCORD_PUBLIC_KEY,
      DISCORD_APPLICATION_ID,
      DISCORD_BOT_TOKEN,
      DISCORD_GATEWAY_SECRET,
      DISCORD_API_BASE_URL: `${discord.url}/api/v10`,
      ...extra,
    },
  });
  await untrace(started.inspectorPort);
  return started;
};
/** The `wrangler dev` the requests go to (the load section starts its own); none when only the bundle is measured. */
let worker = ONLY.some((s) => s !== "bundle") ? await startBenchWorker() : undefined;

// A run stopped from outside (Ctrl-C, a timeout) takes wrangler dev and workerd with it.
for (const signal of ["SIGINT", "SIGTERM"]) {
  process.once(signal, async () => {
    if (worker) {
      writeFileSync(LOG, worker.output());
      await worker.stop();
    }
    process.exit(130);
  });
}

// wrangler dev's own log, kept on disk as the run goes (a run cut short keeps it).
const saveLog = setInterval(() => worker && writeFileSync(LOG, worker.output()), 5_000);
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
  // The independent measure: the CPU time of the workerd processes serving the Worker (its objects, couriers,
  // queue) over the whole batch (bench/proc.mjs), and the object's own record of all its time (bench/object-busy.mjs).
  const workerd = workerdOf(worker.port).runtime;
  const [cpuBefore, ownBefore] = [cpuOf(workerd), objectBusy(worker.persistDir, TEAM, "assistant")];
  for (let k = 0; k < BUSY_TURNS; k++) {
    const t0 = Date.now();
    await expectStatus(await slackRequest(worker.url, { channel, ts: k === 0 ? threadTs : nextTs(), threadTs: k === 0 ? undefined : threadTs, text: `[s:${sid}] turn ${k}` }), 200);
    // Watched from the fake Slack (this process): a poll of the conversation would cost workerd CPU the turn does not.
    await until(`busy turn ${k}`, async () => {
      const calls = await fetch(`${slack.url}/_control/calls?channel=${channel}`).then((r) => r.json());
      // The answer is the turn's last write: edited into its status message, or posted and followed by the status's "Done.".
      const answer = calls.find((c) => (c.method === "chat.postMessage" || c.method === "chat.update") && writtenText(c).includes(`turn ${k} done`));
      return answer && (answer.method === "chat.update" || calls.some((c) => c.method === "chat.update" && c.body.text?.endsWith("Done.") && c.at >= answer.at));
    }, 60_000);
    await sleep(500); // the reports that follow the status message's last update
    const v = await view(TEAM, "assistant", conversation);
    if (v.status !== "idle" || v.turn !== k + 1) throw new Error(`busy turn ${k}: the conversation is ${v.status} at turn ${v.turn}`);
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
  const cpu = cpuOf(workerd) - cpuBefore;
  const own = objectBusy(worker.persistDir, TEAM, "assistant");
  const ownMs = own.hourMs - (ownBefore?.hourMs ?? 0);
  const outsideMs = Object.entries(own.outside).map(([part, ms]) => [part, ms - (ownBefore?.outside[part] ?? 0)]).filter(([, ms]) => ms > 0.005);
  const [wallSum, busySum] = [walls.reduce((a, b) => a + b, 0), busy.reduce((a, b) => a + b, 0)];
  const share = summary(shares);
  const factor = summary(factors, { higherIsBetter: true });
  print(`busy: a ${BUSY_TURNS}-turn Slack conversation; per turn two ${MODEL_MS} ms model calls, two http tool calls of ${TOOL_MS} ms, Slack answering in ${SLACK_MS} ms`);
  print(row("turn wall clock (event POST → last Slack answer)", summary(walls), "ms"));
  print(row("object busy time per turn (runtime's busyByTurn)", summary(busy), "ms"));
  print(row("baseline: the turn awaited inside the object", summary(awaited), "ms"));
  print(row("object busy, share of the turn", share, "%", undefined, { text: "≤ 2 % (median)", met: share.median <= 2 }));
  print(row("awaited baseline ÷ object busy", factor, "x", undefined, { text: "≥ 50× (median)", met: factor.median >= 50 }));
  print(`  over the ${BUSY_TURNS} turns (${(wallSum / 1000).toFixed(1)} s of turns), against an independent measure:`);
  print(row("object busy by busyByTurn, share of the turns", { value: (100 * busySum) / wallSum }, "%", `${busySum.toFixed(1)} ms`));
  print(row("the object's own total (every handler), share", { value: (100 * ownMs) / wallSum }, "%", `${ownMs.toFixed(1)} ms = busyByTurn ${busySum.toFixed(1)} + ${outsideMs.map(([part, ms]) => `${part} ${ms.toFixed(1)}`).join(" + ") || "nothing else"}`));
  print(row("workerd CPU (Worker, objects, couriers, queue), share", { value: (100 * cpu) / wallSum }, "%", `${cpu.toFixed(0)} ms from /proc; ${(cpu / BUSY_TURNS).toFixed(1)} ms a turn`, { text: "≤ 2 %", met: cpu / wallSum <= 0.02 }));
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

// ---- a peer app in its own Node process (bench/bolt-app.mjs, bench/chat-sdk-app.mjs) ----

/** Starts `node bench/<file> ...args` and resolves once it prints its URL; `pid` for its CPU time. */
function startApp(file, args) {
  const child = spawn(process.execPath, [new URL(`./${file}`, import.meta.url).pathname, ...args], { stdio: ["ignore", "pipe", "inherit"] });
  return new Promise((resolve, reject) => {
    let text = "";
    child.stdout.on("data", (d) => {
      text += d;
      const url = /ready (\S+)/.exec(text)?.[1];
      if (url) resolve({ url, pid: child.pid, stop: () => child.kill() });
    });
    child.on("exit", (code) => reject(new Error(`${file} exited (${code})`)));
  });
}

// ---- peer: our Slack turn vs the Vercel Chat SDK's, interleaved ----------------------

const PEER_REPLY = "bench reply ok";
/** The least an event → reply can take: the model's delay, then one Slack call answered. */
const PEER_FLOOR_MS = PEER_MODEL_MS + SLACK_MS;
/** A process at rest: its CPU time moves at most one clock tick in a look. */
const CPU_STILL_MS = 10;
/** A reply still missing this long after its event, with the system at rest, was given up. */
const GIVEN_UP_AFTER_MS = 30_000;
/**
 * Issue 22's throughput goal for the burst is 2× what main did on this
 * machine when it was set: main's turns/s in the recorded run of
 * docs/benchmarks.md ("The peer section"), at BENCH_BURST=200 over 10 workspaces.
 */
const BURST_MAIN_TPS = num("BENCH_BURST_MAIN_TPS", 6.9);

/** The text a Slack write carries (a post's or an update's text, a stream's markdown). */
const writtenText = (call) => String(call.body.text ?? call.body.markdown_text ?? "");

/** Whether `system` is at rest now: nothing armed (ours) and its CPU still for a second. */
async function restsNow(system) {
  const before = system.cpu().runtime;
  await sleep(1000);
  return system.cpu().runtime - before <= CPU_STILL_MS && (await system.idle());
}

/**
 * The runtime workerd's own HTTP socket, behind wrangler dev's proxy: the port
 * of the runtime's processes that answers `GET /` as the Worker does.
 */
async function runtimeUrl(runtimePids) {
  for (const port of runtimePids.flatMap(listeningPorts)) {
    const url = `http://127.0.0.1:${port}`;
    const body = await fetch(`${url}/`).then((r) => r.json()).catch(() => null);
    if (body?.name === "antiproton") return url;
  }
  throw new Error(`no socket of the runtime workerd (${runtimePids}) answers as the Worker`);
}

/** Until `system` has nothing left to do: nothing armed (ours), and its CPU still for two looks in a row. */
async function atRest(system) {
  const deadline = Date.now() + 300_000;
  let last = system.cpu().runtime;
  for (let still = 0; still < 2; ) {
    if (Date.now() > deadline) throw new Error(`${system.name} did not come to rest within 5 minutes`);
    await sleep(250);
    const now = system.cpu().runtime;
    still = now - last <= CPU_STILL_MS && (await system.idle()) ? still + 1 : 0;
    last = now;
  }
}

/**
 * The replies a batch of mentions waits for, each told when the fake Slack
 * answers the first write into its thread that carries the reply (a thread is
 * its channel and the mention's ts; a write naming a message, an update or a
 * stream's append, is in the thread that message was posted in). One that
 * is still missing once the system has come to rest, GIVEN_UP_AFTER_MS after
 * its event, was given up (the runtime logs "failed for good"): it resolves null.
 */
function replyWatch(system) {
  const open = new Map(); // "channel thread" → { since, resolve }
  const threadOf = new Map(); // "channel ts" of a message posted in a thread → its thread ts
  const told = (call, at) => {
    const { channel, thread_ts: posted, ts } = call.body;
    if (call.ts && posted) threadOf.set(`${channel} ${call.ts}`, posted);
    const thread = `${channel} ${posted ?? threadOf.get(`${channel} ${ts}`)}`;
    const waiting = open.get(thread);
    if (!waiting || !writtenText(call).includes(PEER_REPLY)) return;
    open.delete(thread);
    waiting.resolve(at);
  };
  slackAnswers.add(told);
  let closed = false;
  (async () => {
    while (!closed) {
      await sleep(2000);
      const old = [...open].filter(([, w]) => Date.now() - w.since > GIVEN_UP_AFTER_MS);
      if (old.length === 0 || !(await restsNow(system))) continue;
      for (const [thread, w] of old) {
        if (open.get(thread) !== w) continue;
        open.delete(thread);
        w.resolve(null);
      }
    }
  })();
  return {
    reply: (channel, ts) => new Promise((resolve) => open.set(`${channel} ${ts}`, { since: Date.now(), resolve })),
    /** An event that was refused: no reply will come. */
    forget(channel, ts) {
      const thread = `${channel} ${ts}`;
      const waiting = open.get(thread);
      open.delete(thread);
      waiting?.resolve(null);
    },
    close() {
      closed = true;
      slackAnswers.delete(told);
    },
  };
}

/** The fake Slack's calls since the last look. */
let slackSeen = 0;
async function slackCallsSince() {
  const calls = await fetch(`${slack.url}/_control/calls?from=${slackSeen}`).then((r) => r.json());
  slackSeen += calls.length;
  return calls;
}

/**
 * One app_mention, a new thread in `channel`: its ack, when its
 * reply was answered, and the event → reply beyond the floor (null: no reply,
 * or `refused` the ack's status when it was not a 200).
 */
async function mention(system, watch, team, channel, sid) {
  const ts = nextTs();
  const replied = watch.reply(channel, ts);
  const start = Date.now();
  const sent = performance.now();
  // The channel in the text lets the fake provider's record name the turn a model request served.
  const res = await slackRequest(system.url, { team, channel, ts, text: `[s:${sid}] hello ${channel}` });
  const ack = performance.now() - sent;
  await res.arrayBuffer();
  if (res.status !== 200) watch.forget(channel, ts);
  const at = await replied;
  return { ack, refused: res.status === 200 ? undefined : res.status, start, channel, reply: at, beyond: at === null ? null : at - start - PEER_FLOOR_MS, conversation: `${team}:${channel}:${ts}` };
}

/** Runs `work` on a system at rest and charges it what it cost until it was at rest again: CPU time and Slack calls. */
async function charged(system, work) {
  await slackCallsSince();
  const before = system.cpu();
  const began = Date.now();
  const result = await work();
  const worked = Date.now() - began;
  await atRest(system);
  const after = system.cpu();
  return { result, worked, cpu: after.runtime - before.runtime, proxyCpu: after.proxy - before.proxy, calls: await slackCallsSince() };
}

/** A system's turns in one phase: their acks, replies and what they cost. */
class Tally {
  ack = [];
  beyond = [];
  refused = 0;
  lost = 0;
  cpu = 0;
  proxyCpu = 0;
  calls = [];
  turns = 0;
  /** Each turn as mention() told it. */
  mentions = [];
  add(c) {
    for (const t of [c.result].flat()) {
      this.mentions.push(t);
      this.ack.push(t.ack);
      if (t.refused) this.refused++;
      else if (t.beyond === null) this.lost++;
      else this.beyond.push(t.beyond);
      this.turns++;
    }
    this.cpu += c.cpu;
    this.proxyCpu += c.proxyCpu;
    this.calls.push(...c.calls);
  }
  /** "chat.postMessage 2, chat.update 1": the Slack calls per turn, by method. */
  byMethod() {
    const counts = new Map();
    for (const c of this.calls) counts.set(c.method, (counts.get(c.method) ?? 0) + 1);
    return [...counts].map(([m, n]) => `${m} ${Number((n / this.turns).toFixed(2))}`).join(", ");
  }
  get missing() {
    return this.refused || this.lost ? `; ${this.lost} replies given up, ${this.refused} events refused` : "";
  }
}

/** The channel's messages that carry the reply, those still showing "Working on it…", and what the others say. */
async function threadState(channel) {
  const texts = (await fetch(`${slack.url}/_control/messages?channel=${channel}`).then((r) => r.json())).map((m) => String(m.text ?? ""));
  // Ours shows ":hourglass_flowing_sand: Working on it…" until the turn ends.
  const [reply, working] = [(t) => t.includes(PEER_REPLY), (t) => t.includes("Working on it")];
  return { replies: texts.filter(reply).length, working: texts.filter(working).length, others: texts.filter((t) => !reply(t) && !working(t)) };
}

/** "3× «text»": the most common of some messages, for a reader to see what a thread was left with. */
function commonest(texts) {
  const counts = new Map();
  for (const t of texts) counts.set(t.slice(0, 80), (counts.get(t.slice(0, 80)) ?? 0) + 1);
  return [...counts].sort((a, b) => b[1] - a[1]).slice(0, 2).map(([t, n]) => `${n}× «${t}»`).join(", ");
}

/**
 * Where a phase's time beyond the floor goes, per system: event → the model's
 * request arriving at the fake provider, and the model's answer ending → the
 * reply's write arriving at the fake Slack (each turn's request is found by
 * the channel its text names).
 */
async function whereItGoes(tallies, sid) {
  const requests = await control(`/scenarios/${sid}/requests`);
  const modelOf = new Map();
  for (const r of requests) {
    const channel = /hello (C[A-Z0-9]+)/.exec(JSON.stringify(r.body))?.[1];
    if (channel && !modelOf.has(channel)) modelOf.set(channel, r);
  }
  for (const [system, tally] of tallies) {
    const replyAt = new Map();
    for (const call of tally.calls) if (writtenText(call).includes(PEER_REPLY) && !replyAt.has(call.body.channel)) replyAt.set(call.body.channel, call.at);
    const [before, after] = [[], []];
    for (const turn of tally.mentions) {
      const model = modelOf.get(turn.channel);
      if (!model?.endedAt || !replyAt.has(turn.channel)) continue;
      before.push(model.at - turn.start);
      after.push(replyAt.get(turn.channel) - model.endedAt);
    }
    print(row(`${system.name}: event → model request`, summary(before), "ms"));
    print(row(`${system.name}: model's answer → reply write`, summary(after), "ms"));
  }
}

/** Our runtime as a system a section charges: its workerd's CPU time (the same process throughout), at rest when nothing is armed. */
function ourSystem(section) {
  const workerd = workerdOf(worker.port);
  return {
    name: "ours",
    url: worker.url,
    cpu: () => {
      const now = workerdOf(worker.port);
      if (now.runtime.join() !== workerd.runtime.join()) throw new Error(`workerd restarted during the ${section} section (${workerd.runtime} → ${now.runtime}): its CPU time cannot be compared`);
      return { runtime: cpuOf(now.runtime), proxy: cpuOf(now.proxy) };
    },
    idle: async () => (await armedAlarms(worker.persistDir)) === 0,
  };
}

async function peerSection() {
  const sid = `peer${run}`;
  await putScenario(sid, [{ delayMs: PEER_MODEL_MS, text: PEER_REPLY }]);
  const toolSid = `peertool${run}`;
  await putScenario(toolSid, [{ delayMs: PEER_MODEL_MS, toolCalls: [{ name: "clock__now", arguments: {} }] }, { delayMs: PEER_MODEL_MS, text: PEER_REPLY }], "position");
  // Both know the people in the events, as a workspace's Slack does (the Chat SDK looks up each author once).
  await fetch(`${slack.url}/_control/directory`, { method: "PUT", body: JSON.stringify({ users: { UBENCH: { name: "bench" }, [BOT]: { name: "benchbot" } } }) });
  const app = await startApp("chat-sdk-app.mjs", [`${provider.url}/v1`, FAKE_PROVIDER_KEY, "slack", SLACK_SECRET, FAKE_SLACK_BOT_TOKEN, `${slack.url}/api/`]);
  const R = run.toUpperCase();
  const team = `TPEER${R}`;
  const workerd = workerdOf(worker.port);
  const ours = { ...ourSystem("peer"), tag: "O" };
  const peer = { name: "Chat SDK", tag: "P", url: app.url, cpu: () => ({ runtime: cpuMs(app.pid), proxy: 0 }), idle: async () => true };
  const systems = [ours, peer];
  const watches = new Map(systems.map((s) => [s, replyWatch(s)]));
  /** Each round alternates which system goes first. */
  const inTurn = (k) => (k % 2 === 0 ? systems : [...systems].reverse());
  const vs = (a, b) => `${(a / b).toFixed(2)}× the Chat SDK`;
  try {
    print(`peer: our Slack turn vs the Vercel Chat SDK's (chat + @chat-adapter/slack, bench/chat-sdk-app.mjs, in-memory state, its own Node process), interleaved;`);
    print(`  machine: ${cpus().length} CPUs, load average ${loadavg().map((l) => l.toFixed(1)).join(" ")} at the start (the box is shared: figures move with it)`);
    print(`  both: signed app_mention → a ${PEER_MODEL_MS} ms model (the same fake provider, OpenAI Chat Completions through pi-ai) → the reply posted to the same fake Slack (${SLACK_MS} ms a write); floor ${PEER_FLOOR_MS} ms`);
    // Warm-up (not counted): each system's first turns compile its code and make its first objects.
    for (const system of systems) {
      for (let k = 0; k < 2; k++) await charged(system, () => mention(system, watches.get(system), team, `CW${system.tag}${R}X${k}`, sid));
    }
    // What each costs at rest, per second: the looks that find a system at rest are charged to its batches too.
    const rest = {};
    for (const system of systems) {
      const before = system.cpu().runtime;
      await sleep(5_000);
      rest[system.name] = (system.cpu().runtime - before) / 5;
    }
    print(`  at rest (5 s each, after a warm-up of 2 turns): workerd runtime ${rest.ours.toFixed(1)} ms CPU a second, the Chat SDK's process ${rest["Chat SDK"].toFixed(1)} ms (a garbage collection may fall in it; each batch below is charged until it is at rest again)`);

    /** Prints one phase: event → reply, ack, CPU and Slack calls per turn, ours against the Chat SDK. */
    const report = (label, o, p, { goals }) => {
      const [ob, pb, oa, pa] = [summary(o.beyond), summary(p.beyond), summary(o.ack), summary(p.ack)];
      print(`  ${label}:`);
      print(row(`Chat SDK: event → reply beyond the floor`, pb, "ms", p.missing.slice(2) || undefined));
      print(row(`ours: event → reply beyond the floor`, ob, "ms", `median ${vs(ob.median, pb.median)}${o.missing}`, goals && { text: "≤ 3× (median)", met: ob.median <= 3 * pb.median && !o.lost && !o.refused }));
      print(row(`Chat SDK: Slack ack`, pa, "ms"));
      print(row(`ours: Slack ack`, oa, "ms", `p50 ${vs(oa.median, pa.median)}, p99 ${vs(oa.p99, pa.p99)}`, goals === "concurrent" ? { text: "p99 ≤ 2×", met: oa.p99 <= 2 * pa.p99 } : undefined));
      const [oc, pc, proxy] = [o.cpu / o.turns, p.cpu / p.turns, o.proxyCpu / o.turns];
      print(row(`Chat SDK: CPU per turn (its Node process)`, { value: pc }, "ms", `${p.turns} turns`));
      print(row(`ours: CPU per turn (workerd runtime)`, { value: oc }, "ms", vs(oc, pc), goals && { text: "≤ 2×", met: oc <= 2 * pc }));
      print(row(`ours: CPU per turn (+ wrangler's proxy workerd)`, { value: oc + proxy }, "ms", vs(oc + proxy, pc)));
      print(row(`Chat SDK: Slack calls per turn`, { value: p.calls.length / p.turns }, "", p.byMethod()));
      print(row(`ours: Slack calls per turn`, { value: o.calls.length / o.turns }, "", o.byMethod()));
    };

    // One at a time, ours and the peer taking turns; every handler call into the object counted around ours.
    let t = Date.now();
    const handlersBefore = objectCounters(worker.persistDir).handlers;
    const sequential = new Map(systems.map((s) => [s, new Tally()]));
    const plainConversations = [];
    for (let k = 0; k < PEER_SEQUENTIAL; k++) {
      for (const system of inTurn(k)) {
        const c = await charged(system, () => mention(system, watches.get(system), team, `CS${system.tag}${R}X${k}`, sid));
        sequential.get(system).add(c);
        if (system === ours) plainConversations.push(c.result.conversation);
      }
    }
    const handlersPlain = objectCounters(worker.persistDir).handlers;
    report(`one at a time (${((Date.now() - t) / 1000).toFixed(0)} s)`, sequential.get(ours), sequential.get(peer), { goals: "sequential" });

    // Tool turns, ours only: the model asks for clock__now, then answers.
    const tool = new Tally();
    const toolConversations = [];
    for (let k = 0; k < PEER_TOOL_TURNS; k++) {
      const c = await charged(ours, () => mention(ours, watches.get(ours), team, `CT${R}X${k}`, toolSid));
      tool.add(c);
      toolConversations.push(c.result.conversation);
    }
    const handlersTool = objectCounters(worker.persistDir).handlers;
    // The runtime's own attribution of those calls to the turns (busyByTurn), read after the counts (a read is a call too).
    const attributed = async (conversations) => summary(await Promise.all(conversations.map(async (id) => (await view(team, "assistant", id)).busyByTurn.find((b) => b.turn === 1)?.handlers ?? 0)));
    const [plainAttributed, toolAttributed] = [await attributed(plainConversations), await attributed(toolConversations)];
    const plainCalls = (handlersPlain - handlersBefore) / PEER_SEQUENTIAL;
    const toolCalls = (handlersTool - handlersPlain) / PEER_TOOL_TURNS;
    print(`  calls into the agent object per turn (every handler call, passes included: the object's own busy_hours.handlers, read from its SQLite):`);
    print(row(`plain turn (the ${PEER_SEQUENTIAL} above, one object)`, { value: plainCalls }, "", `busyByTurn counts ${plainAttributed.median} of them to the turn (median)`, { text: "≤ 5", met: plainCalls <= 5 }));
    print(row(`tool turn (clock__now, then the reply; ${PEER_TOOL_TURNS} turns)`, { value: toolCalls }, "", `busyByTurn counts ${toolAttributed.median}`, { text: "≤ 10", met: toolCalls <= 10 }));
    print(row(`tool turn: beyond its floor (2 model calls + Slack)`, summary(tool.beyond.map((ms) => ms - PEER_MODEL_MS)), "ms", `CPU ${(tool.cpu / tool.turns).toFixed(1)} ms; Slack calls ${(tool.calls.length / tool.turns).toFixed(2)}: ${tool.byMethod()}${tool.missing}`));

    // PEER_WIDTH conversations of one workspace at once, in rounds that alternate ours and the peer.
    t = Date.now();
    const concurrent = new Map(systems.map((s) => [s, new Tally()]));
    const rounds = Math.max(1, Math.round(PEER_CONCURRENT / 64));
    const size = Math.round(PEER_CONCURRENT / rounds);
    const prof = process.env.BENCH_PROFILE ? await profiler(worker.inspectorPort) : null;
    for (let r = 0; r < rounds; r++) {
      for (const system of inTurn(r)) {
        const profiled = prof && system === ours;
        concurrent.get(system).add(
          await charged(system, async () => {
            if (profiled) await prof.start();
            const result = await pool(size, PEER_WIDTH, (i) => mention(system, watches.get(system), team, `CC${system.tag}${R}X${r}X${i}`, sid));
            if (profiled) await prof.stop(process.env.BENCH_PROFILE, `concurrent-${r}`);
            return result;
          }),
        );
      }
    }
    report(`${PEER_WIDTH} conversations of one workspace at once, ${rounds} rounds of ${size} each (${((Date.now() - t) / 1000).toFixed(0)} s)`, concurrent.get(ours), concurrent.get(peer), { goals: "concurrent" });
    await whereItGoes(concurrent, sid);

    // PEER_WIDTH conversations at once, every thread in ONE channel of the workspace (issue 40): their
    // posts share the channel's send pace, and the fake Slack sets no limit on it.
    t = Date.now();
    const oneChannel = new Map(systems.map((s) => [s, new Tally()]));
    for (let r = 0; r < PEER_ONE_CHANNEL_ROUNDS; r++) {
      for (const system of inTurn(r)) {
        const channel = `CH${system.tag}${R}X${r}`;
        oneChannel.get(system).add(await charged(system, () => pool(PEER_WIDTH, PEER_WIDTH, () => mention(system, watches.get(system), team, channel, sid))));
      }
    }
    report(`${PEER_WIDTH} conversations at once, every thread in one channel, ${PEER_ONE_CHANNEL_ROUNDS} rounds (${((Date.now() - t) / 1000).toFixed(0)} s)`, oneChannel.get(ours), oneChannel.get(peer), { goals: "one channel" });

    // The burst: every app_mention at once, over BURST_TEAMS workspaces (one agent object each), a thread each.
    if (BURST === 0) print(`  burst: not run (BENCH_BURST=200 runs issue 22's: 200 app_mentions over 10 workspaces sent all at once)`);
    const width = BURST_WIDTH || BURST;
    if (BURST > 0) print(`  burst: ${BURST} app_mentions over ${BURST_TEAMS} workspaces, ${width === BURST ? "sent all at once" : `${width} at once`} (a thread each), the Chat SDK, then ours straight to its runtime, then ours through wrangler dev's proxy:`);
    const burst = {};
    // Ours is sent a burst twice: straight to the runtime's own socket, as a deployed Worker is reached
    // (the goals), and through wrangler dev's proxy, the dev-only hop every other figure here includes.
    const direct = BURST > 0 ? { ...ours, name: "ours, direct", tag: "D", url: await runtimeUrl(workerd.runtime) } : null;
    if (direct) watches.set(direct, replyWatch(direct));
    for (const system of BURST > 0 ? [peer, direct, ours] : []) {
      const start = Date.now();
      const profiled = prof && system === direct;
      const c = await charged(system, async () => {
        if (profiled) await prof.start();
        const result = await pool(BURST, width, (i) => mention(system, watches.get(system), `TB${system.tag}${R}X${i % BURST_TEAMS}`, `CB${system.tag}${R}X${i}`, sid));
        if (profiled) await prof.stop(process.env.BENCH_PROFILE, "burst");
        return result;
      });
      const states = await pool(BURST, 16, (i) => threadState(`CB${system.tag}${R}X${i}`));
      const acks = c.result.map((x) => x.ack);
      const replies = c.result.filter((x) => x.reply !== null);
      const last = Math.max(start, ...replies.map((x) => x.reply));
      const b = {
        once: states.filter((s) => s.replies === 1).length,
        twice: states.filter((s) => s.replies > 1).length,
        none: states.filter((s) => s.replies === 0).length,
        working: states.reduce((n, s) => n + s.working, 0),
        refused: c.result.filter((x) => x.refused).length,
        seconds: (last - start) / 1000,
      };
      b.tps = replies.length === 0 ? 0 : replies.length / b.seconds;
      burst[system.name] = b;
      const ackMax = Math.max(...acks);
      const over = (ms) => acks.filter((a) => a >= ms).length;
      const ourGoal = (goal) => (system === direct ? goal : undefined);
      print(row(`${system.name}: ack`, summary(acks), "ms", `max ${ackMax.toFixed(0)} ms; ${over(1000)} over 1 s, ${over(3000)} over 3 s (Slack would retry)${b.refused ? `; ${b.refused} refused` : ""}`, ourGoal({ text: "every ack < 1 s", met: over(1000) === 0 && !b.refused })));
      print(row(`${system.name}: replies posted once`, { value: b.once }, `of ${BURST}; ${b.none} never, ${b.twice} more than once; ${b.working} statuses left "Working on it…"`, undefined, ourGoal({ text: "every reply once", met: b.once === BURST })));
      const others = states.flatMap((s) => s.others);
      if (others.length > 0) print(`    ${system.name}: other messages in the threads: ${others.length}, the commonest ${commonest(others)}`);
      const vsPeer = system !== peer ? ` (${(b.tps / burst["Chat SDK"].tps).toFixed(2)}× the Chat SDK's)` : "";
      const goal = BURST_MAIN_TPS > 0 && BURST === 200 && BURST_TEAMS === 10 && width === BURST ? ourGoal({ text: `≥ 2× main's ${BURST_MAIN_TPS} turns/s`, met: b.tps >= 2 * BURST_MAIN_TPS }) : undefined;
      const throughput = replies.length === 0 ? "no reply" : `${replies.length} replies = ${b.tps.toFixed(1)} turns/s${vsPeer}`;
      const tally = new Tally();
      tally.add(c);
      print(row(`${system.name}: first event → last reply`, { value: b.seconds }, "s", `${throughput}; per turn CPU ${(c.cpu / BURST).toFixed(1)} ms, Slack calls ${(c.calls.length / BURST).toFixed(2)}${c.calls.length ? `: ${tally.byMethod()}` : ""}`, goal));
    }
    prof?.close();
    print(`  load average at the end: ${loadavg().map((l) => l.toFixed(1)).join(" ")}`);
  } finally {
    for (const watch of watches.values()) watch.close();
    app.stop();
  }
}

// ---- 2. ack: Slack event ack vs @slack/bolt, and a bare request -------------------

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
  const bolt = await startApp("bolt-app.mjs", [SLACK_SECRET]);
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

// ---- 7. scale: calls into objects per plain turn, by class -----------------------------------

async function scale() {
  // Its own wrangler dev, counting every call into an object (no other section's figures pay for it).
  writeFileSync(LOG, worker.output());
  await worker.stop();
  LOG = join(tmpdir(), `antiproton-bench-${run}-scale.log`);
  worker = await startBenchWorker(SCALE_VARS);
  await scaleSection({ url: worker.url, admin: ADMIN, provider: provider.url, print, row, pool, run });
}

// ---- run ------------------------------------------------------------------------

const sectionRetries = () => {
  const n = retried.count;
  retried.count = 0;
  return n;
};

const load = () => loadavg().map((l) => l.toFixed(1)).join(" ");
const discordBench = () =>
  discordSection({
    discord,
    answers: discordAnswers,
    gatewaySecret: DISCORD_GATEWAY_SECRET,
    providerUrl: `${provider.url}/v1`,
    providerKey: FAKE_PROVIDER_KEY,
    ours: ourSystem("discord"),
    putScenario,
    modelRequests: (sid) => control(`/scenarios/${sid}/requests`),
    startApp,
    atRest,
    restsNow,
    resending,
    cpuMs,
    loadavg: load,
    print,
    row,
    summary,
    pool,
    run,
    reply: PEER_REPLY,
    modelMs: PEER_MODEL_MS,
    discordMs: DISCORD_MS,
  });
const tail = () => tailSection({ api, post, view, putScenario, print, row, summary, run });
const bundle = () => bundleSection({ print, row, summary });
const sections = { bundle, busy: busySection, stream: streamSection, tail, peer: peerSection, discord: discordBench, ack: ackSection, fleet: fleetSection, idle: idleSection, script: scriptSection, load: loadSection, scale };
const began = Date.now();
try {
  print(`antiproton bench — wrangler dev on loopback, fakes for Slack and the provider; ${new Date().toISOString()}; sections: ${ONLY.join(", ")}`);
  for (const name of SECTIONS) {
    if (!ONLY.includes(name)) continue;
    const t = Date.now();
    if (worker) await untrace(worker.inspectorPort);
    await sections[name]();
    print(`  (${name}: ${((Date.now() - t) / 1000).toFixed(0)} s; requests sent again after wrangler dev's 503 "worker restarted mid-request": ${sectionRetries()})`);
    print();
  }
  print(`total ${((Date.now() - began) / 1000).toFixed(0)} s`);
} catch (err) {
  if (worker) console.error(`wrangler dev's last words:\n${worker.output().slice(-4000)}`);
  throw err;
} finally {
  if (worker) {
    writeFileSync(LOG, worker.output());
    console.log(`wrangler dev's log: ${LOG}`);
    await worker.stop();
  }
  if (stateToRemove) rmSync(stateToRemove, { recursive: true, force: true });
  await Promise.all([provider.close(), slack.close(), discord.close(), tool.close()]);
}

// `npm run test:faults`: crash the whole Worker (SIGKILL to wrangler dev's
// process group) at each named point of a turn, restart it on the same state
// folder, and count what was lost or said twice.
//
// The turn, through Slack (signed events, the loopback Slack fake): a mention
// → model call 1 asks for ledger__append (a non-idempotent write, allowed) and
// vault__append (the same write, held for approval) → the card is posted →
// model call 2 answers REPLY-1 → the person approves on the card → the held
// append is performed → model call 3 answers REPLY-2 → the status says Done.
//
// Every run also holds the tenant's ledger to what the fake provider billed:
// each answer the provider finished is counted once, tokens and calls, whatever
// the kill interrupted (a paid answer read, then its reply streamed or its
// report made when the Worker died). An answer the dead Worker asked for (the
// fake handled it before the restart) that the provider finished after the
// kill began, or within UNREAD_MS before, may not have been read to its end
// (docs/metering.md says such an answer is not counted): it may be missing,
// never counted twice.
//
// The "telegram:" and "gchat:" points are a direct-message turn of their own
// (a private chat's message to the Telegram bot, or a DM to the Google Chat
// app, through the loopback fakes): model call 1 asks for ledger__append,
// model call 2 answers REPLY-1, which is edited into the turn's status
// message. Killed during model call 1, or while the platform holds the
// answer's send (or, for Google Chat, as the status message's answer left),
// it must still end with REPLY-1 once in the chat and no status message left
// working. The "teams:" points are the same turn in a Teams 1:1 chat (an
// activity signed as the Bot Framework signs it, through the loopback Bot
// Connector fake), its answer an update of the status message.
//
// "during exec" is a turn of its own: model call 1 asks box__exec (a machine on
// the real local machine host, which outlives the Worker as a container
// would) to run curl, which POSTs to the ledger; the kill comes while the
// ledger holds that request. After the restart the call is answered "outcome
// unknown" (never run twice), model call 2 answers REPLY-1, and the machine is
// destroyed with the turn's end: none is left on the host.
//
// "responses: between a function_call and its output" is a turn of the OpenAI
// Responses API: model call 1 calls the caller's own function tool, so the
// response completes with a function_call item and the turn waits for its
// output; the kill comes then, and after the restart the caller's
// function_call_output carries the turn on: model call 2 answers REPLY-1,
// the output given to the turn once (a resend of the follow-up is the same
// response, by its Idempotency-Key).
//
// Each kill point is an event from the fakes (test/fakes/gates.mjs), never a
// sleep: the fake holds the chosen request (or has just answered it) and the
// harness kills at once. Every wait is bounded. Exit code 1 on any loss or
// duplicate.
//
//   FAULTS_RUNS=3             runs per kill point
//   FAULTS_SETTLE_SECONDS=45  how long a turn may take to finish after the restart
//   FAULTS_POINTS=a,b         only these kill points (by name)
import { createHmac, createPrivateKey, randomUUID, sign } from "node:crypto";
import { once } from "node:events";
import { Gates } from "../fakes/gates.mjs";
import { BOT_FRAMEWORK_ISSUER, signToken } from "../fakes/teams.mjs";
import { crashVars, startFakes } from "../fakes/index.mjs";
import { startMachineHost } from "../machines/host.mjs";
import { startWorker } from "../node/wrangler-dev.mjs";

const RUNS = Number(process.env.FAULTS_RUNS ?? 3);
const SETTLE_MS = Number(process.env.FAULTS_SETTLE_SECONDS ?? 45) * 1000;
/** How long a healthy Worker may take to reach a kill point or a step before it. */
const STEP_MS = 30_000;
/** An answer the provider finished this close before the kill may have died unread with the Worker. */
const UNREAD_MS = 500;
/** After a machine's turn is done, how long its machine may take to be destroyed. */
const MACHINE_GONE_MS = 15_000;
/** How long a courier takes, at most, to report what a platform answered (a kill point after a send's report). */
const REPORTED_MS = 1_000;
/** After the turn is done, how long no new Slack call must come before the counts are read. */
const QUIET_MS = 1_500;
const TEAM = "TFAULTS";
const USER = "UFAULTPERSON";
const BOT = "UFAKEBOT";

const POINTS = [
  { name: "none" },
  { name: "during model call 1", hold: (run) => ["provider", (i) => i.scenario === run.id && i.position === 0] },
  { name: "during model call 2", hold: (run) => ["provider", (i) => i.scenario === run.id && i.position === 1] },
  { name: "just after the tool answered", after: (run) => ["ledger", (i) => i.op === "answered" && i.entry === run.entryA] },
  { name: "tool call in flight", hold: (run) => ["ledger", (i) => i.op === "append" && i.entry === run.entryA] },
  { name: "during a chat send", hold: (run) => ["slack", (c) => c.method === "chat.postMessage" && c.body.channel === run.channel && said(c).includes(`REPLY-1 ${run.id}`)] },
  // REPLY-1 written slowly, so it is streamed: the kill comes while Slack's answer to chat.startStream is held.
  { name: "during chat.startStream", slow: true, hold: (run) => ["slack", (c) => c.method === "chat.startStream" && c.body.channel === run.channel] },
  // REPLY-1's one "." is its last piece: an update holding it leaves once the courier has read the whole (paid) answer, before it reports.
  { name: "while the streamed reply is finished", slow: true, hold: (run) => ["slack", (c) => c.method === "chat.appendStream" && c.body.channel === run.channel && said(c).includes(".")] },
  // The courier has reported REPLY-1's answer and sends the reply's end (the run the object hands back) before it counts the answer.
  { name: "while the courier reports", slow: true, hold: (run) => ["slack", (c) => c.method === "chat.stopStream" && c.body.channel === run.channel] },
  { name: "during a decision", hold: (run) => ["ledger", (i) => i.op === "append" && i.entry === run.entryB] },
  // A second after the turn's status message was answered (its report in the object): a kill between that post and its
  // report is another point, during a chat send, which Telegram gives no way to find again (docs/not-done.md, Telegram).
  {
    name: "telegram: during model call 1",
    direct: "telegram",
    hold: (run) => ["provider", (i) => i.scenario === run.id && i.position === 0],
    once: (run) => ["telegram-answered", (c) => c.method === "sendMessage" && String(c.params.chat_id) === String(run.chatId) && c.status === 200],
  },
  {
    name: "telegram: during the chat send",
    direct: "telegram",
    hold: (run) => ["telegram", (c) => (c.method === "sendMessage" || c.method === "editMessageText") && String(c.params.chat_id) === String(run.chatId) && String(c.params.text).includes(`REPLY-1 ${run.id}`)],
  },
  // Google Chat can be asked: a status message posted again under its messageId is Chat's 409, the message made.
  { name: "gchat: during model call 1", direct: "gchat", hold: (run) => ["provider", (i) => i.scenario === run.id && i.position === 0] },
  {
    name: "gchat: during the chat send",
    direct: "gchat",
    hold: (run) => ["gchat", (c) => c.space === run.space && String(c.body.text).includes(`REPLY-1 ${run.id}`)],
  },
  { name: "gchat: as the status message's answer left", direct: "gchat", after: (run) => ["gchat-answered", (c) => c.method === "POST" && c.space === run.space && c.status === 200 && String(c.body.text).includes("Working on it")] },
  // As Telegram's: a second after the status message's POST was answered; its update into the answer held.
  {
    name: "teams: during model call 1",
    direct: "teams",
    hold: (run) => ["provider", (i) => i.scenario === run.id && i.position === 0],
    once: (run) => ["teams-answered", (c) => c.method === "POST" && c.conversation === run.teamsConversation && c.activity.type === "message" && c.status === 201],
  },
  {
    name: "teams: during the chat send",
    direct: "teams",
    hold: (run) => ["teams", (c) => c.conversation === run.teamsConversation && String(c.activity.text).includes(`REPLY-1 ${run.id}`)],
  },
  { name: "during exec", machine: true, hold: (run) => ["ledger", (i) => i.op === "append" && i.entry === run.entryC] },
  { name: "responses: between a function_call and its output", responses: true },
];

const gates = new Gates();
gates.setMaxListeners(0);
const { fakes, bindings } = await startFakes({ gates });
const signingSecret = bindings.SLACK_SIGNING_SECRET;
const ledgerUrl = fakes.ledger.url;
const machineHost = await startMachineHost();
const { MACHINE_BACKEND, MACHINE_HOST_URL, MACHINE_HOST_TOKEN, MACHINE_HOST_MISSING } = machineHost.bindings;
const vars = {
  ...crashVars(bindings),
  MOUNTS: JSON.stringify([
    { alias: "ledger", plugin: "ledger", config: { url: ledgerUrl } },
    { alias: "vault", plugin: "ledger", config: { url: ledgerUrl }, policy: { write: "approval" } },
    // Its only way out is the ledger, which its command calls.
    { alias: "box", plugin: "machine", config: { memoryMiB: 256, diskMiB: 64, network: { allowedHosts: [new URL(ledgerUrl).host] } }, policy: { tools: { exec: "allow" } } },
  ]),
  MACHINE_BACKEND,
  ...(MACHINE_HOST_URL ? { MACHINE_HOST_URL, MACHINE_HOST_TOKEN } : {}),
  SLACK_API_BASE_URL: bindings.SLACK_API_BASE_URL,
  SLACK_SIGNING_SECRET: signingSecret,
  SLACK_BOT_TOKEN: bindings.SLACK_BOT_TOKEN,
  TELEGRAM_API_BASE_URL: bindings.TELEGRAM_API_BASE_URL,
  TELEGRAM_BOTS: bindings.TELEGRAM_BOTS,
  TELEGRAM_WEBHOOK_SECRET: bindings.TELEGRAM_WEBHOOK_SECRET,
  GCHAT_API_BASE_URL: bindings.GCHAT_API_BASE_URL,
  GCHAT_CERTS_URL: bindings.GCHAT_CERTS_URL,
  GCHAT_AUDIENCE: bindings.GCHAT_AUDIENCE,
  GCHAT_SERVICE_ACCOUNT: bindings.GCHAT_SERVICE_ACCOUNT,
  TEAMS_APP_ID: bindings.TEAMS_APP_ID,
  TEAMS_APP_PASSWORD: bindings.TEAMS_APP_PASSWORD,
  TEAMS_OPENID_METADATA_URL: bindings.TEAMS_OPENID_METADATA_URL,
  TEAMS_TOKEN_URL: bindings.TEAMS_TOKEN_URL,
};
/** The Telegram turn's bot: its tenant, and the secret token its webhook was set with (docs/telegram.md). */
const TELEGRAM_TENANT = "tgbot";
const telegramSecret = createHmac("sha256", bindings.TELEGRAM_WEBHOOK_SECRET).update(`telegram-webhook:${TELEGRAM_TENANT}`).digest("hex");
const cwd = new URL("../..", import.meta.url).pathname;
// The Worker with the test-only ledger plugin: the non-idempotent effect whose repeats are counted.
const script = "test/worker-under-test.ts";

/** Every Slack Web API call the Worker made, in order (the fake reports each as an event). */
const slackCalls = [];
gates.on("slack", (call) => slackCalls.push(call));
/** Every Bot API call that made or edited a message, in order; every Chat API call likewise. */
const telegramCalls = [];
gates.on("telegram", (call) => telegramCalls.push(call));
const gchatCalls = [];
gates.on("gchat", (call) => gchatCalls.push(call));
/** A bearer token as Google Chat signs it, with the fake's Chat key (docs/gchat.md: the audience is the project number). */
const gchatKey = createPrivateKey({ key: JSON.parse(bindings.FAKE_GCHAT_SIGNING_KEY), format: "jwk" });
function gchatToken() {
  const part = (value) => Buffer.from(JSON.stringify(value)).toString("base64url");
  const now = Math.floor(Date.now() / 1000);
  const body = `${part({ alg: "RS256", kid: JSON.parse(bindings.FAKE_GCHAT_SIGNING_KEY).kid, typ: "JWT" })}.${part({ iss: "chat@system.gserviceaccount.com", aud: bindings.GCHAT_AUDIENCE, iat: now, exp: now + 3600 })}`;
  return `${body}.${sign("RSA-SHA256", Buffer.from(body), gchatKey).toString("base64url")}`;
}
const GCHAT_TENANT = "gchat";
/** The Teams turn's Microsoft Entra tenant. */
const TEAMS_TENANT = "0fa17000-0000-4000-8000-000000000001";
/** Every Connector call that made or updated a message, in order. */
const teamsCalls = [];
gates.on("teams", (call) => teamsCalls.push(call));
const appends = new Map();
gates.on("ledger", (i) => i.op === "append" && appends.set(i.entry, (appends.get(i.entry) ?? 0) + 1));

// Killed mid-work on purpose: what workerd reports uncaught then is this harness's doing, and its counts judge the run.
let worker = await startWorker({ cwd, vars, script, allowUncaught: true });
const persistDir = worker.persistDir;

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Resolves when `check()` holds, re-checked on every call to the chat fake
 * (`slack`, `telegram`, `gchat` or `teams`); rejects once `deadline.at` has passed (the harness
 * moves it when it restarts the Worker).
 */
function until(fake, what, check, deadline) {
  return new Promise((resolve, reject) => {
    let timer;
    const test = () => {
      const value = check();
      if (value) {
        cleanup();
        resolve(value);
      }
    };
    // The deadline moves (Infinity while the Worker restarts): it is looked at again at least every second.
    const arm = () => {
      timer = setTimeout(() => (Date.now() >= deadline.at ? (cleanup(), reject(new Error(`no ${what} in time`))) : arm()), Math.min(1000, Math.max(0, deadline.at - Date.now())));
    };
    const cleanup = () => {
      clearTimeout(timer);
      gates.off(fake, test);
    };
    gates.on(fake, test);
    arm();
    test();
  });
}

function signed(body, contentType) {
  const timestamp = String(Math.floor(Date.now() / 1000));
  const signature = `v0=${createHmac("sha256", signingSecret).update(`v0:${timestamp}:${body}`).digest("hex")}`;
  return { method: "POST", headers: { "content-type": contentType, "x-slack-request-timestamp": timestamp, "x-slack-signature": signature }, body };
}

/** Posts to the Worker; while it is down (killed, restarting) the same request is sent again, as Slack retries. */
async function toWorker(path, init, deadline) {
  for (;;) {
    try {
      const res = await fetch(`${worker.url}${path}`, init);
      if (res.status < 500) return res;
      await res.body?.cancel();
    } catch {}
    if (Date.now() > deadline.at) throw new Error(`${path} was not accepted in time`);
    await sleep(100);
    await restarted;
  }
}

let restarted = Promise.resolve();

/** The last kill: when it began, and when the Worker served again (a request the fakes saw before then came from the dead one). */
let kill = null;

async function crashAndRestart() {
  let done;
  restarted = new Promise((resolve) => (done = resolve));
  const at = Date.now();
  await worker.kill();
  const started = Date.now();
  worker = await startWorker({ cwd, vars, script, persistDir, port: worker.port, allowUncaught: true });
  kill = { at, restartedAt: Date.now() };
  done();
  return Date.now() - started;
}

function runOf(point, n) {
  const id = `f${randomUUID().replaceAll("-", "").slice(0, 10)}`;
  return { point, n, id, channel: `C${id.toUpperCase()}`, space: `spaces/D${id}`, chatId: 1_000_000 + Math.floor(Math.random() * 1e9), teamsConversation: `a:1fault${id}`, entryA: `a-${id}`, entryB: `b-${id}`, entryC: `c-${id}`, ts: `${Math.floor(Date.now() / 1000)}.${String(n).padStart(6, "0")}` };
}

/** What a call says: a reply's Markdown, or a message's text. */
const said = (c) => String(c.body.markdown_text ?? c.body.text ?? "");
const inChannel = (run) => slackCalls.filter((c) => c.body.channel === run.channel);
const posts = (run) => inChannel(run).filter((c) => c.method === "chat.postMessage");
/** The thread's messages holding a reply, as the fake Slack holds them now (streamed or posted). */
async function replyMessages(run, label) {
  const messages = await (await fetch(`${fakes.slack.url}/_control/messages?${new URLSearchParams({ channel: run.channel })}`)).json();
  return messages.filter((m) => !m.blocks && String(m.text).includes(`${label} ${run.id}`));
}
/** A reply's writes: posted, streamed, or (a plain turn's answer) its status message edited into it. */
const isAnswerEdit = (c) => c.method === "chat.update" && c.body.markdown_text !== undefined;
const replyPosts = (run, label) =>
  inChannel(run).filter((c) => (c.method === "chat.postMessage" || c.method === "chat.startStream" || isAnswerEdit(c)) && !c.body.blocks && said(c).includes(`${label} ${run.id}`));
const cardPosts = (run) => posts(run).filter((c) => JSON.stringify(c.body.blocks ?? []).includes("hold:approve:"));
const failureNotices = (run) => posts(run).filter((c) => said(c).includes("this turn failed"));

/**
 * Done: the turn's last reply (REPLY-2, or REPLY-1 of a machine's turn) was written (posted, or its status
 * message edited into it), and no status message still says it is working: each ended ("Done.") or became an
 * answer (a turn whose answer took its unsent status row's place has no status message at all).
 */
function finished(run) {
  const calls = inChannel(run);
  const last = run.point.machine ? "REPLY-1" : "REPLY-2";
  const replied = calls.some((c) => (c.method === "chat.postMessage" || isAnswerEdit(c)) && !c.body.blocks && said(c).includes(`${last} ${run.id}`));
  const statuses = new Map();
  for (const c of calls) {
    if (c.method === "chat.postMessage" && c.body.blocks && said(c).includes("Working on it")) statuses.set(c.ts, said(c));
    else if (c.method === "chat.update" && statuses.has(c.body.ts)) statuses.set(c.body.ts, said(c));
  }
  return replied && [...statuses.values()].every((text) => !text.includes("Working on it"));
}

/**
 * The direct-message platforms' turns: the tenant, the fake's event name, the
 * calls made in the run's chat and what each said, the chat's messages as the
 * fake holds them now (their text), and the person's message to the agent.
 */
const DIRECT = {
  telegram: {
    tenant: TELEGRAM_TENANT,
    fake: "telegram",
    calls: (run) => telegramCalls.filter((c) => String(c.params.chat_id) === String(run.chatId)),
    text: (c) => String(c.params.text),
    messages: async (run) => (await (await fetch(`${fakes.telegram.url}/_control/messages?chat=${run.chatId}`)).json()).map((m) => m.text),
    send(run, deadline) {
      const update = {
        update_id: run.chatId,
        message: {
          message_id: 1,
          from: { id: run.chatId, is_bot: false, first_name: "Fault", last_name: "Person" },
          chat: { id: run.chatId, first_name: "Fault", type: "private" },
          date: Math.floor(Date.now() / 1000),
          text: `[s:${run.id}] record ${run.entryA}`,
        },
      };
      const headers = { "content-type": "application/json", "x-telegram-bot-api-secret-token": telegramSecret };
      return toWorker(`/telegram/${TELEGRAM_TENANT}/webhook`, { method: "POST", headers, body: JSON.stringify(update) }, deadline);
    },
  },
  gchat: {
    tenant: GCHAT_TENANT,
    fake: "gchat",
    calls: (run) => gchatCalls.filter((c) => c.space === run.space),
    text: (c) => String(c.body.text),
    messages: async (run) => (await (await fetch(`${fakes.gchat.url}/_control/messages?space=${run.space}`)).json()).map((m) => m.shown),
    send(run, deadline) {
      const person = { name: "users/100000000000000000077", displayName: "Fault Person", type: "HUMAN" };
      const text = `[s:${run.id}] record ${run.entryA}`;
      const event = {
        type: "MESSAGE",
        eventTime: new Date().toISOString(),
        space: { name: run.space, type: "DM", spaceType: "DIRECT_MESSAGE", singleUserBotDm: true },
        user: person,
        message: { name: `${run.space}/messages/${run.id}.${run.id}`, sender: person, text, argumentText: text, thread: { name: `${run.space}/threads/${run.id}` }, space: { name: run.space } },
      };
      const headers = { "content-type": "application/json", authorization: `Bearer ${gchatToken()}` };
      return toWorker("/gchat/events", { method: "POST", headers, body: JSON.stringify(event) }, deadline);
    },
  },
  teams: {
    tenant: TEAMS_TENANT,
    fake: "teams",
    calls: (run) => teamsCalls.filter((c) => c.conversation === run.teamsConversation),
    text: (c) => String(c.activity.text),
    messages: async (run) => (await (await fetch(`${fakes.teams.url}/_control/messages?${new URLSearchParams({ conversation: run.teamsConversation })}`)).json()).map((m) => m.text),
    /** A 1:1 message to the bot, its token signed as the Bot Framework signs it (each retry a fresh one). */
    send(run, deadline) {
      const activity = {
        type: "message",
        id: `1${run.chatId}`,
        channelId: "msteams",
        serviceUrl: fakes.teams.serviceUrl,
        from: { id: `29:fault${run.id}`, name: "Fault Person", aadObjectId: randomUUID() },
        recipient: { id: `28:${bindings.TEAMS_APP_ID}`, name: "Agent" },
        conversation: { conversationType: "personal", tenantId: TEAMS_TENANT, id: run.teamsConversation },
        text: `[s:${run.id}] record ${run.entryA}`,
      };
      const now = Math.floor(Date.now() / 1000);
      const token = signToken({ iss: BOT_FRAMEWORK_ISSUER, aud: bindings.TEAMS_APP_ID, serviceurl: fakes.teams.serviceUrl, nbf: now - 5, exp: now + 3600 });
      const headers = { "content-type": "application/json", authorization: `Bearer ${token}` };
      return toWorker("/teams/api/messages", { method: "POST", headers, body: JSON.stringify(activity) }, deadline);
    },
  },
};
const directOf = (run) => DIRECT[run.point.direct];
const directSaid = (run, text) => directOf(run).calls(run).some((c) => directOf(run).text(c).includes(text));

/** Done: REPLY-1 was written into the chat, and no message of it still says the turn is working. */
async function directFinished(run) {
  const messages = await directOf(run).messages(run);
  return messages.some((m) => m.includes(`REPLY-1 ${run.id}`)) && !messages.some((m) => m.startsWith("⏳"));
}

/** The person's side of a direct-message turn: a message to the agent; then wait for its answer. */
async function directConverse(run, deadline) {
  const res = await directOf(run).send(run, deadline);
  await res.body?.cancel();
  await until(directOf(run).fake, "REPLY-1", () => directSaid(run, `REPLY-1 ${run.id}`), deadline);
  while (!(await directFinished(run))) {
    if (Date.now() > deadline.at) throw new Error("no REPLY-1 with its status ended in time");
    await sleep(200);
  }
}

/** The Responses API turn's agent, and the caller's function tool its model calls. */
const RESPONSES_TENANT = "apifaults";
const NOTE_TOOL = { type: "function", name: "note_entry", description: "Notes an entry in the caller's book.", parameters: { type: "object", properties: { entry: { type: "string" } }, required: ["entry"] } };

/** A create of the Responses API (sent again while the Worker is down, as a client retries); its answer, or why it failed. */
async function createResponse(body, deadline, headers = {}) {
  const init = { method: "POST", headers: { authorization: `Bearer ${vars.ADMIN_TOKEN}`, "content-type": "application/json", ...headers }, body: JSON.stringify({ model: `${RESPONSES_TENANT}/agent`, tools: [NOTE_TOOL], ...body }) };
  const res = await toWorker("/v1/responses", init, deadline);
  if (!res.ok) throw new Error(`a create was answered ${res.status}: ${await res.text()}`);
  return res.json();
}

/**
 * The caller's side of the Responses API turn: a create whose answer is the
 * model's function_call; then (after the kill, when there is one) its output,
 * whose response must carry REPLY-1. Counts, in the conversation as the
 * Agents API shows it, the output given and REPLY-1 said: each once.
 */
async function responsesConverse(run, deadline) {
  const first = await createResponse({ input: `[s:${run.id}] note ${run.entryA}` }, deadline);
  const call = first.output.at(-1);
  if (first.status !== "completed" || call?.type !== "function_call") throw new Error(`the first response is not a completed function_call: ${JSON.stringify(first)}`);
  run.paused?.();
  await run.restarted;
  const input = [{ type: "function_call_output", call_id: call.call_id, output: `noted ${run.entryA}` }];
  const second = await createResponse({ previous_response_id: first.id, input }, deadline, { "Idempotency-Key": `output-${run.id}` });
  if (!second.output_text.includes(`REPLY-1 ${run.id}`)) throw new Error(`the output's response has no REPLY-1: ${JSON.stringify(second)}`);
  const res = await toWorker(`/v1/tenants/${RESPONSES_TENANT}/agents/agent/conversations/${first.conversation.id}`, { headers: { authorization: `Bearer ${vars.ADMIN_TOKEN}` } }, deadline);
  const { transcript } = await res.json();
  const given = transcript.filter((e) => e.role === "tool" && e.toolCallId === call.call_id).length;
  const said = transcript.filter((e) => e.role === "assistant" && e.text.includes(`REPLY-1 ${run.id}`)).length;
  run.twice = Math.abs(given - 1) + Math.abs(said - 1);
}

/** The person's side of the turn: mention the agent, then approve the card once REPLY-1 is there. */
async function converse(run, deadline) {
  if (run.point.direct) return directConverse(run, deadline);
  if (run.point.responses) return responsesConverse(run, deadline);
  const mention = {
    type: "event_callback",
    team_id: TEAM,
    api_app_id: "AFAULTS",
    event_id: `Ev${run.id}`,
    event_time: Math.floor(Date.now() / 1000),
    authorizations: [{ team_id: TEAM, user_id: BOT, is_bot: true, is_enterprise_install: false }],
    event: { type: "app_mention", user: USER, text: `<@${BOT}> [s:${run.id}] record ${run.entryA} and ${run.entryB}`, ts: run.ts, channel: run.channel, channel_type: "channel" },
  };
  const res = await toWorker("/slack/events", signed(JSON.stringify(mention), "application/json"), deadline);
  await res.body?.cancel();
  if (run.point.machine) return until("slack", "REPLY-1 and Done", () => finished(run), deadline);
  await until("slack", "card and REPLY-1", () => cardPosts(run).length > 0 && replyPosts(run, "REPLY-1").length > 0, deadline);
  const card = cardPosts(run)[0];
  const approve = card.body.blocks.flatMap((b) => b.elements ?? []).find((e) => String(e.value ?? "").startsWith("hold:approve:"));
  const click = {
    type: "block_actions",
    user: { id: USER, team_id: TEAM },
    team: { id: TEAM },
    channel: { id: run.channel },
    container: { type: "message", channel_id: run.channel, message_ts: card.ts, thread_ts: run.ts },
    message: { ts: card.ts, thread_ts: run.ts },
    actions: [{ action_id: approve.action_id, value: approve.value, action_ts: `${Math.floor(Date.now() / 1000)}.${run.n}` }],
  };
  const clicked = await toWorker("/slack/interactivity", signed(new URLSearchParams({ payload: JSON.stringify(click) }).toString(), "application/x-www-form-urlencoded"), deadline);
  await clicked.body?.cancel();
  await until("slack", "REPLY-2 and Done", () => finished(run), deadline);
}

/** Resolves when the kill point is reached: a held request arrived, or the watched answer was sent. */
function killPoint(run) {
  const { point } = run;
  // The caller waits, its function_call answered, until the Worker has been killed and restarted.
  if (point.responses) {
    run.restarted = new Promise((resolve) => (run.restart = resolve));
    return new Promise((resolve) => (run.paused = resolve));
  }
  if (point.hold) {
    const [fake, match] = point.hold(run);
    gates.holdOnce(fake, match);
    const held = (async () => {
      for (;;) {
        const [held] = await once(gates, "held");
        if (held.fake === fake && match(held.info)) return;
      }
    })();
    if (!point.once) return held;
    // And only once this has happened too.
    const [other, seen] = point.once(run);
    const happened = new Promise((resolve) => {
      const listen = (info) => seen(info) && (gates.off(other, listen), resolve());
      gates.on(other, listen);
    }).then(() => sleep(REPORTED_MS));
    return Promise.all([held, happened]);
  }
  if (point.after) {
    const [fake, match] = point.after(run);
    return new Promise((resolve) => {
      const listen = (info) => match(info) && (gates.off(fake, listen), resolve());
      gates.on(fake, listen);
    });
  }
  return null;
}

/** Lets a late duplicate show: returns once the channel has had no new Slack call for QUIET_MS. */
async function quiet(run) {
  const calls = run.point.direct ? directOf(run).calls : inChannel;
  let count = -1;
  while (calls(run).length !== count) {
    count = calls(run).length;
    await sleep(QUIET_MS);
  }
}

/** The tenant's ledger today: answers counted and their tokens (the usage API, as an operator reads it). */
async function ledgerTotals(tenant, deadline) {
  const res = await toWorker(`/v1/tenants/${tenant}/usage`, { headers: { authorization: `Bearer ${vars.ADMIN_TOKEN}` } }, deadline);
  const { totals } = await res.json();
  return { calls: totals.calls, tokens: totals.inputTokens + totals.cachedInputTokens + totals.cacheWriteTokens + totals.outputTokens };
}

/**
 * What the fake provider billed for the run: every answer it finished, with
 * the tokens it reported; `unread`: those the dead Worker asked for, finished
 * after UNREAD_MS before the kill (the fake, in this process, may handle a
 * request sent just before the kill only after it, and writes its answer into
 * a connection it has not yet seen closed).
 */
async function billed(run, kill) {
  const requests = await (await fetch(`${fakes.provider.url}/_control/scenarios/${run.id}/requests`)).json();
  const paid = requests.filter((r) => r.usage?.prompt_tokens !== undefined);
  const sum = (answers) => ({ calls: answers.length, tokens: answers.reduce((n, r) => n + r.usage.prompt_tokens + r.usage.completion_tokens, 0) });
  const unread = kill === null ? [] : paid.filter((r) => r.at < kill.restartedAt && r.endedAt > kill.at - UNREAD_MS);
  return { all: sum(paid), unread: sum(unread) };
}

/**
 * The ledger's part of the run (after less before) once it matches what was
 * billed, or as it stands after a bounded wait (an answer is counted after its
 * reply is sent): every answer once, but for those that may have died unread.
 */
async function ledgerCheck(run, before, kill) {
  const { all, unread } = await billed(run, kill);
  const within = (got) => got.calls <= all.calls && got.tokens <= all.tokens && got.calls >= all.calls - unread.calls && got.tokens >= all.tokens - unread.tokens;
  const deadline = { at: Date.now() + 15_000 };
  let got;
  do {
    const now = await ledgerTotals(tenantOf(run), deadline);
    got = { calls: now.calls - before.calls, tokens: now.tokens - before.tokens };
    if (got.calls === all.calls && got.tokens === all.tokens) break;
    await sleep(500);
  } while (Date.now() < deadline.at);
  const maybe = unread.calls > 0 ? ` (${unread.calls} asked by the killed Worker and finished as it died, maybe unread)` : "";
  return { ok: within(got), note: `ledger ${got.calls} answers / ${got.tokens} tokens, billed ${all.calls} / ${all.tokens}${maybe}` };
}

/** The machine host's live machines. */
async function machines() {
  const res = await fetch(`${MACHINE_HOST_URL}/machines`, { headers: { authorization: `Bearer ${MACHINE_HOST_TOKEN}` } });
  return (await res.json()).machines;
}

/** Waits (bounded) until the host has no machine left; returns how many are. */
async function machinesLeft() {
  const until = Date.now() + MACHINE_GONE_MS;
  let left = await machines();
  while (left.length > 0 && Date.now() < until) {
    await sleep(250);
    left = await machines();
  }
  return left.length;
}

const tenantOf = (run) => (run.point.direct ? directOf(run).tenant : run.point.responses ? RESPONSES_TENANT : TEAM);

function steps(run) {
  if (run.point.responses) return [{ toolCalls: [{ name: "note_entry", arguments: { entry: run.entryA } }] }, { text: `REPLY-1 ${run.id}: the entry is noted.` }];
  if (run.point.direct) return [{ toolCalls: [{ name: "ledger__append", arguments: { entry: run.entryA } }] }, { text: `REPLY-1 ${run.id}: the entry is recorded.` }];
  if (run.point.machine) {
    const append = `curl -sS -m 55 -H 'content-type: application/json' -d '{"entry":"${run.entryC}"}' ${ledgerUrl}/append`;
    return [{ toolCalls: [{ name: "box__exec", arguments: { command: append } }] }, { text: `REPLY-1 ${run.id}: the command ran (or its outcome is unknown).` }];
  }
  return [
    { toolCalls: [{ name: "ledger__append", arguments: { entry: run.entryA } }, { name: "vault__append", arguments: { entry: run.entryB } }] },
    // REPLY-1 written slowly where the point needs it streamed.
    { text: `REPLY-1 ${run.id}: the second entry waits for your approval.`, ...(run.point.slow ? { argumentChunk: 4, chunkDelayMs: 120 } : {}) },
    { text: `REPLY-2 ${run.id}: both entries are recorded.` },
  ];
}

/** A machine's turn: its exec was answered "outcome unknown" (a kill mid-exec is never run again), and no machine is left. */
async function machineChecks(run) {
  const requests = await (await fetch(`${fakes.provider.url}/_control/scenarios/${run.id}/requests`)).json();
  const told = JSON.stringify(requests.at(-1)?.body ?? {}).includes("The outcome of box__exec is unknown");
  const left = await machinesLeft();
  return { leftMachines: left, note: `${told ? "exec answered: outcome unknown" : "exec NOT answered outcome unknown"}; ${left} machines left` , told };
}

async function trial(run) {
  if (run.point.machine && MACHINE_HOST_MISSING) return { ...run, outcome: "error", note: `no machine host here: ${MACHINE_HOST_MISSING}`, dupReplies: 0, dupEffects: 0 };
  await fetch(`${fakes.provider.url}/_control/scenarios/${run.id}`, { method: "PUT", body: JSON.stringify({ by: "position", steps: steps(run) }) });
  const before = await ledgerTotals(tenantOf(run), { at: Date.now() + STEP_MS });
  kill = null;
  const reached = killPoint(run);
  const started = Date.now();
  let outcome = "completed";
  let note = "";
  // Until the kill, each step has STEP_MS; after the restart the turn has SETTLE_MS to finish.
  const deadline = { at: started + (reached ? STEP_MS : SETTLE_MS) };
  const conversation = converse(run, deadline).catch((err) => err);
  if (reached) {
    const first = await Promise.race([reached.then(() => "kill"), conversation.then(() => "ended")]);
    if (first !== "kill") {
      gates.clear();
      return { ...run, outcome: "error", note: "the kill point was never reached", replies: 0, effects: 0, leftMachines: 0 };
    }
    deadline.at = Infinity;
    note = `restarted in ${await crashAndRestart()} ms`;
    run.restart?.();
    deadline.at = Date.now() + SETTLE_MS;
  }
  const result = await conversation;
  if (result instanceof Error) {
    const told = run.point.direct ? directSaid(run, "this turn failed") : failureNotices(run).length > 0;
    outcome = told ? "failed" : "lost";
    note = `${note}; ${result.message}`;
  }
  await quiet(run);
  // A reply said twice is two messages in the thread holding it; one that is not whole (a stream left half-way) counts too.
  // The Responses API turn's are counted in its conversation: the function's output given, and REPLY-1 said.
  let dupReplies = run.point.direct || run.point.responses ? (run.twice ?? 0) : Math.max(0, cardPosts(run).length - 1);
  for (const whole of steps(run).flatMap((step) => (step.text ? [step.text] : []))) {
    const held = run.point.direct ? (await directOf(run).messages(run)).filter((m) => m.includes(whole.split(":")[0])).map((text) => ({ text })) : await replyMessages(run, whole.split(" ")[0]);
    dupReplies += Math.max(0, held.length - 1) + held.filter((m) => m.text !== whole || m.streaming).length;
  }
  // A status message said twice stays "working" beside the one the answer was edited into.
  if (run.point.direct) dupReplies += (await directOf(run).messages(run)).filter((m) => m.startsWith("⏳")).length;
  const dupEffects = [run.entryA, run.entryB, run.entryC].reduce((n, entry) => n + Math.max(0, (appends.get(entry) ?? 0) - 1), 0);
  const ledger = await ledgerCheck(run, before, kill);
  note = `${note}; ${ledger.note}`;
  const ledgerWrong = ledger.ok ? 0 : 1;
  if (!run.point.machine) return { ...run, outcome, note, dupReplies, dupEffects, ledgerWrong, leftMachines: 0, ms: Date.now() - started };
  const checked = await machineChecks(run);
  // A crash mid-exec must be answered "outcome unknown"; a run with no kill must not be.
  if (outcome === "completed" && checked.told !== (reached !== null)) outcome = "lost";
  return { ...run, outcome, note: `${note}; ${checked.note}`, dupReplies, dupEffects, ledgerWrong, leftMachines: checked.leftMachines, ms: Date.now() - started };
}

const wanted = process.env.FAULTS_POINTS?.split(",").map((s) => s.trim());
const points = wanted ? POINTS.filter((p) => wanted.includes(p.name)) : POINTS;
const results = [];
console.log(`test:faults: ${points.length} kill points × ${RUNS} runs on wrangler dev (${worker.url}); a turn has ${SETTLE_MS / 1000} s after a restart to finish`);
try {
  for (const point of points) {
    for (let n = 1; n <= RUNS; n++) {
      const result = await trial(runOf(point, n));
      results.push(result);
      console.log(`${point.name} #${n}: ${result.outcome} in ${result.ms ?? "?"} ms, duplicate replies ${result.dupReplies}, duplicate effects ${result.dupEffects}${result.note ? ` (${result.note})` : ""}`);
    }
  }
} finally {
  await worker.stop();
  await machineHost.close();
}

const rows = points.map((point) => {
  const mine = results.filter((r) => r.point === point);
  const count = (outcome) => mine.filter((r) => r.outcome === outcome).length;
  return {
    point: point.name,
    completed: `${count("completed")}/${mine.length}`,
    failed: count("failed"),
    lost: count("lost") + count("error"),
    replies: mine.reduce((n, r) => n + r.dupReplies, 0),
    effects: mine.reduce((n, r) => n + r.dupEffects, 0),
    ledger: mine.reduce((n, r) => n + (r.ledgerWrong ?? 0), 0),
    machines: mine.reduce((n, r) => n + r.leftMachines, 0),
  };
});
console.log("\n| kill point | completed | failed (told) | lost | duplicate replies | duplicate effects | ledger not as billed | machines left |\n| --- | --- | --- | --- | --- | --- | --- | --- |");
for (const r of rows) console.log(`| ${r.point} | ${r.completed} | ${r.failed} | ${r.lost} | ${r.replies} | ${r.effects} | ${r.ledger} | ${r.machines} |`);
const bad = results.filter((r) => r.outcome !== "completed" || r.dupReplies > 0 || r.dupEffects > 0 || r.ledgerWrong > 0 || r.leftMachines > 0);
console.log(bad.length === 0 ? "\nevery kill point: completed, nothing lost, nothing said or done twice, every paid answer counted once, no machine left" : `\n${bad.length} of ${results.length} runs lost, failed, repeated or miscounted something`);
process.exit(bad.length === 0 ? 0 : 1);

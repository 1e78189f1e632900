// The Slack Socket Mode connector's forwarding path, in Node, against the
// running Worker (`wrangler dev` on a free loopback port), the fake Slack Web
// API and the fake model provider. A Bolt receiver test double stands in for
// the socket: it hands Bolt what Socket Mode envelopes carry and records the acks.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { after, before, test } from "node:test";
import { createConnector } from "../../bridges/slack/socket-mode.mjs";
import { onlyProviderVars, startModelProvider } from "../fakes/model-provider.mjs";
import { FAKE_SLACK_BOT_TOKEN, startSlack } from "../fakes/slack.mjs";
import { startWorker, until } from "./wrangler-dev.mjs";

const ROOT = new URL("../..", import.meta.url).pathname;
const SECRET = "node-test-slack-forward-secret";
const fixture = (name) => JSON.parse(readFileSync(new URL(`../fixtures/slack/${name}`, import.meta.url), "utf8"));
const recorded = fixture("streaming-slack.json");
const slashCommands = fixture("slash-commands-slack.json");

/** Stands in for SocketModeReceiver: Bolt calls init(); the test delivers payloads as the socket would. */
class SocketDouble {
  init(app) {
    this.app = app;
  }
  async start() {}
  async stop() {}
  /** Delivers one envelope payload; resolves with what it was acked with (undefined: acked empty). */
  async deliver(body, retryNum) {
    const acks = [];
    await this.app.processEvent({ body, retryNum, ack: async (response) => void acks.push(response) });
    return acks;
  }
}

let slack;
let provider;
let worker;

before(async () => {
  slack = await startSlack();
  provider = await startModelProvider();
  worker = await startWorker({
    cwd: ROOT,
    vars: {
      SLACK_SOCKET_FORWARD_SECRET: SECRET,
      SLACK_API_BASE_URL: `${slack.url}/api`,
      SLACK_BOT_TOKEN: FAKE_SLACK_BOT_TOKEN,
      SLACK_SIGNING_SECRET: "unused-over-the-socket",
      ...onlyProviderVars(provider),
    },
  });
});

after(async () => {
  await worker?.stop();
  await slack?.close();
  await provider?.close();
});

function connector(secret = SECRET) {
  const socket = new SocketDouble();
  createConnector({ url: worker.url, secret, receiver: socket, logLevel: "error" });
  return socket;
}

/** The thread's replies: posted, or (a plain turn) the status message edited into the answer, with its post's thread. */
async function replies(channel) {
  const calls = await (await fetch(`${slack.url}/_control/calls?channel=${channel}`)).json();
  const threadOf = new Map(calls.filter((c) => c.method === "chat.postMessage" && c.body.blocks).map((c) => [c.ts, c.body.thread_ts]));
  return calls
    .filter((c) => (c.method === "chat.postMessage" ? !c.body.blocks : c.method === "chat.update" && c.body.markdown_text !== undefined))
    .map((c) => ({ ...c, body: { ...c.body, thread_ts: c.body.thread_ts ?? threadOf.get(c.body.ts) } }));
}

test("a recorded mention over the socket is answered in its thread, once, even when the socket retries it", async () => {
  const socket = connector();
  const channel = `CSOCK${Date.now()}`;
  const envelope = structuredClone(recorded.aiMention);
  envelope.event.channel = channel;
  assert.deepEqual(await socket.deliver(envelope), [undefined]);
  assert.deepEqual(await socket.deliver(envelope, 1), [undefined]);

  const first = await until("the reply", async () => {
    const calls = await replies(channel);
    return calls.length > 0 && calls;
  });
  // The status message is finalised with the reply (edited into it) or after it ("Done."): once it is, nothing more is coming.
  await until("the final status", async () => {
    const updates = await (await fetch(`${slack.url}/_control/calls?channel=${channel}&method=chat.update`)).json();
    return updates.some((c) => c.body.markdown_text !== undefined || c.body.text?.endsWith("Done."));
  });
  const final = await replies(channel);
  assert.deepEqual(
    final.map((c) => [c.body.markdown_text, c.body.thread_ts, c.token]),
    [["ok: AI What is love?", recorded.aiMention.event.ts, FAKE_SLACK_BOT_TOKEN]],
  );
  assert.equal(first.length, 1);
});

test("a bot's message over the socket starts no turn", async () => {
  const socket = connector();
  const channel = `CBOT${Date.now()}`;
  const envelope = structuredClone(recorded.promptMessage);
  envelope.event.channel = channel;
  assert.deepEqual(await socket.deliver(envelope), [undefined]);
  const person = structuredClone(recorded.aiMention);
  person.event.channel = channel;
  person.event.ts = "1767406699.000001";
  await socket.deliver(person);
  await until("the person's reply", async () => (await replies(channel)).length > 0);
  assert.deepEqual((await replies(channel)).map((c) => c.body.thread_ts), ["1767406699.000001"]);
});

test("a recorded slash command is acked with the Worker's ephemeral answer", async () => {
  const socket = connector();
  const acks = await socket.deliver({ ...slashCommands.slashCommand, command: "/agent", text: "help" });
  assert.equal(acks.length, 1);
  assert.equal(acks[0].response_type, "ephemeral");
  assert.match(acks[0].text, /\/agent stop/);
});

test("a connector with the wrong forward secret is refused by the Worker, and says so", async () => {
  const socket = connector("not-the-secret");
  const acks = await socket.deliver({ ...slashCommands.slashCommand, command: "/agent", text: "status" });
  assert.deepEqual(acks, [{ response_type: "ephemeral", text: "The agent could not be reached. Is the Worker running?" }]);
});

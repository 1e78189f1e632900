// The discord section of `npm run bench` (issue 40, acceptance 1, its Discord
// half): our Discord turn against the Vercel Chat SDK's (`@chat-adapter/discord`,
// bench/chat-sdk-app.mjs), interleaved, with 16 conversations at once and every
// one in ONE Discord channel. To both, a conversation in a channel is a thread
// (ours: a thread is a channel of its own and its own conversation; a mention
// in the channel itself would be one more message in the channel's one
// conversation), so each round is a person's mention of the bot in each of 16
// threads of one channel, sent at once. Both get it as their own gateway
// connector forwards a MESSAGE_CREATE (neither can reach Discord's gateway
// here): ours signed to POST /discord/gateway-events (bridges/discord/gateway.mjs's
// fields), the Chat SDK's as its Gateway listener forwards it to its webhook
// (the raw event, `x-discord-gateway-token`). Both answer through the same
// fake Discord (test/fakes/discord.mjs: no limit, but every message call
// answered with Discord's bucket headers), after the same fixed model.
// A third system measured the same way: ours with the 16 conversations in 16
// channels of their own, which tells what one channel costs beyond many.
import { readFileSync } from "node:fs";
import { setTimeout as sleep } from "node:timers/promises";
import { DISCORD_APPLICATION_ID, DISCORD_BOT_TOKEN, DISCORD_PUBLIC_KEY } from "../test/fakes/discord.mjs";
import { signatureHeaders } from "../bridges/shared/connector.mjs";

const num = (name, fallback) => Number(process.env[name] ?? fallback);
/** Rounds of WIDTH conversations at once, each system (BENCH_DISCORD_ROUNDS). */
const ROUNDS = num("BENCH_DISCORD_ROUNDS", 4);
const WIDTH = 16;
/** A message call's bucket in the fake: this many per 5 s, so none is ever refused, and every answer carries the headers. */
const NO_LIMIT = 10_000;
/** A reply still missing this long after its event, with the system at rest, was given up. */
const GIVEN_UP_AFTER_MS = 30_000;
/** A recorded forwarded mention (the Chat SDK's own fixture): the shape of each event, with new ids. */
const RECORDED = JSON.parse(readFileSync(new URL("../test/fixtures/discord/discord.json", import.meta.url), "utf8")).gatewayMention.data;
/** Discord's channel types: a guild's text channel, a public thread. */
const [TEXT, PUBLIC_THREAD] = [0, 11];

/** Snowflakes, as Discord makes them: the time in the high bits, a counter below. */
let sequence = 0n;
const snowflake = () => String(((BigInt(Date.now()) - 1420070400000n) << 22n) + (sequence++ % 4096n));

/** "POST messages", "PATCH messages", "GET channel", "POST typing": a call's route without its ids. */
const routeOf = (call) => `${call.method} ${call.kind === "lookup" ? "channel" : call.kind === "typing" ? "typing" : call.messageId ? "message" : "messages"}`;

/**
 * `bench`: { worker (our wrangler dev: url), discord (the fake: url), answers (a Set the
 * fake's `answering` tells (call, at) once it answers), gatewaySecret, providerUrl,
 * providerKey, putScenario, modelRequests(sid) (the fake provider's record of a scenario's requests), startApp, ours (the runtime as a system: name, url, cpu(),
 * idle()), atRest(system), restsNow(system), resending(send), print, row, summary, pool,
 * run, reply (the model's text), modelMs, discordMs }.
 */
export async function discordSection(bench) {
  const { discord, answers, putScenario, startApp, ours: runtime, atRest, restsNow, resending, print, row, summary, pool, run, reply, modelMs, discordMs } = bench;
  const floor = modelMs + discordMs;
  const sid = `discord${run}`;
  await putScenario(sid, [{ delayMs: modelMs, text: reply }]);
  const guild = snowflake();
  const user = { ...RECORDED.author, id: snowflake(), username: "bench", global_name: "Bench" };
  const app = await startApp("chat-sdk-app.mjs", [bench.providerUrl, bench.providerKey, "discord", DISCORD_PUBLIC_KEY, DISCORD_BOT_TOKEN, DISCORD_APPLICATION_ID, `${discord.url}/api/v10`]);

  // Every answered call, and the reply each conversation (its channel: a thread, or a channel of its own) waits for.
  const calls = [];
  const open = new Map(); // channel → { since, resolve }
  const told = (call, at) => {
    calls.push(call);
    const waiting = open.get(call.channelId);
    if (call.kind !== "channel" || !waiting || !String(call.body?.content ?? "").includes(reply)) return;
    open.delete(call.channelId);
    waiting.resolve(at);
  };
  answers.add(told);

  /** The channels of one batch, known to the fake: their parent (a thread's) and a bucket per route that never runs out. */
  const channels = async (list) => {
    const post = (path, body) => fetch(`${discord.url}/_control/${path}`, { method: "POST", body: JSON.stringify(body) }).then((r) => r.json());
    await post("channels", { channels: list });
    await post("buckets", { channels: list.map((c) => c.id), limit: NO_LIMIT, resetAfter: 5, global: NO_LIMIT });
  };

  /** A person's mention of the bot in `channel`, as each system's connector forwards it. */
  const forwards = {
    ours: (system, message) => {
      // The fields bridges/discord/gateway.mjs's gatewayPayload takes from discord.js's message.
      const { id, channel_id, guild_id, content, webhook_id = null, author, attachments } = message;
      const body = JSON.stringify({ id, channel_id, guild_id, content, webhook_id, author: { ...author, bot: false }, attachments });
      return resending(() => fetch(`${system.url}/discord/gateway-events`, { method: "POST", headers: { "content-type": "application/json", ...signatureHeaders(bench.gatewaySecret, body) }, body }));
    },
    // The Chat SDK's Gateway listener forwards the raw event to its webhook, with the bot token as its proof.
    peer: (system, message) =>
      fetch(`${system.url}/api/webhooks/discord`, {
        method: "POST",
        headers: { "content-type": "application/json", "x-discord-gateway-token": DISCORD_BOT_TOKEN },
        body: JSON.stringify({ type: "GATEWAY_MESSAGE_CREATE", timestamp: Date.now(), data: message }),
      }),
  };

  /** One mention in `channel` (its type: a thread or a text channel): when its reply was answered, and beyond the floor (null: none came). */
  const mention = async (system, channel) => {
    const replied = new Promise((resolve) => open.set(channel.id, { since: Date.now(), resolve }));
    const message = {
      ...RECORDED,
      id: snowflake(),
      nonce: snowflake(),
      timestamp: new Date().toISOString(),
      channel_id: channel.id,
      channel_type: channel.type,
      guild_id: guild,
      author: user,
      content: `<@${DISCORD_APPLICATION_ID}> [s:${sid}] hello ${channel.id}`,
    };
    const start = Date.now();
    const res = await forwards[system.forward](system, message);
    await res.arrayBuffer();
    if (!res.ok) {
      open.delete(channel.id);
      return { start, channel: channel.id, refused: res.status, beyond: null };
    }
    const at = await replied;
    return { start, channel: channel.id, beyond: at === null ? null : at - start - floor };
  };

  // A reply still missing GIVEN_UP_AFTER_MS after its event, once its system is at rest, was given up.
  let closed = false;
  const giveUp = (async () => {
    while (!closed) {
      await sleep(2000);
      const old = [...open].filter(([, w]) => Date.now() - w.since > GIVEN_UP_AFTER_MS);
      if (old.length === 0) continue;
      let resting = true;
      for (const system of systems) resting = resting && (await restsNow(system));
      if (!resting) continue;
      for (const [channel, w] of old) if (open.get(channel) === w) (open.delete(channel), w.resolve(null));
    }
  })();

  /** A batch run on a system at rest, charged until it is at rest again: its CPU time and Discord calls. */
  const charged = async (system, work) => {
    const mark = calls.length;
    const before = system.cpu().runtime;
    const result = await work();
    await atRest(system);
    return { result, cpu: system.cpu().runtime - before, calls: calls.slice(mark) };
  };

  const ours = { ...runtime, name: "ours, one channel", forward: "ours", threads: true };
  const peer = { name: "Chat SDK, one channel", url: app.url, forward: "peer", threads: true, cpu: () => ({ runtime: bench.cpuMs(app.pid), proxy: 0 }), idle: async () => true };
  const spread = { ...runtime, name: `ours, ${WIDTH} channels`, forward: "ours", threads: false };
  const systems = [ours, peer, spread];

  /** WIDTH new conversations for `system`: threads of one new channel, or channels of their own. */
  const conversations = async (system) => {
    const parent = snowflake();
    const list = Array.from({ length: WIDTH }, () => (system.threads ? { id: snowflake(), type: PUBLIC_THREAD, parent_id: parent, guild_id: guild } : { id: snowflake(), type: TEXT, guild_id: guild }));
    await channels(list);
    return list;
  };

  const tallies = new Map(systems.map((s) => [s, { mentions: [], beyond: [], refused: 0, lost: 0, cpu: 0, calls: [], turns: 0 }]));
  const add = (system, c) => {
    const t = tallies.get(system);
    for (const m of c.result) {
      t.mentions.push(m);
      if (m.refused) t.refused++;
      else if (m.beyond === null) t.lost++;
      else t.beyond.push(m.beyond);
      t.turns++;
    }
    t.cpu += c.cpu;
    t.calls.push(...c.calls);
  };

  /**
   * Where the time beyond the floor goes, per system: event → the model's request arriving at the
   * fake provider, and the model's answer ending → the reply's call arriving at the fake Discord
   * (each turn's request is found by the channel its text names).
   */
  const whereItGoes = async () => {
    const modelOf = new Map();
    for (const r of await bench.modelRequests(sid)) {
      const channel = /hello (\d+)/.exec(JSON.stringify(r.body))?.[1];
      if (channel && !modelOf.has(channel)) modelOf.set(channel, r);
    }
    for (const system of systems) {
      const t = tallies.get(system);
      const replyAt = new Map();
      for (const c of t.calls) if (c.kind === "channel" && String(c.body?.content ?? "").includes(reply) && !replyAt.has(c.channelId)) replyAt.set(c.channelId, c.at);
      const [before, after] = [[], []];
      for (const m of t.mentions) {
        const model = modelOf.get(m.channel);
        if (!model?.endedAt || !replyAt.has(m.channel)) continue;
        before.push(model.at - m.start);
        after.push(replyAt.get(m.channel) - model.endedAt);
      }
      print(row(`${system.name}: event → model request`, summary(before), "ms"));
      print(row(`${system.name}: model's answer → reply call`, summary(after), "ms"));
    }
  };

  try {
    print(`discord: our Discord turn vs the Vercel Chat SDK's (chat + @chat-adapter/discord, bench/chat-sdk-app.mjs, in-memory state, its own Node process), interleaved;`);
    print(`  both: a mention forwarded as each one's gateway connector does → a ${modelMs} ms model (the same fake provider) → the reply posted to the same fake Discord (${discordMs} ms a call, no limit, Discord's bucket headers); floor ${floor} ms`);
    print(`  ${WIDTH} conversations at once, each a thread of ONE channel (a new channel each round), ${ROUNDS} rounds; and ours with them in ${WIDTH} channels of their own; load average ${bench.loadavg()}`);
    // Warm-up (not counted): each system's first turns compile its code and make its first objects.
    for (const system of systems) {
      const list = await conversations(system);
      for (const channel of list.slice(0, 2)) await charged(system, async () => [await mention(system, channel)]);
    }
    const t = Date.now();
    for (let r = 0; r < ROUNDS; r++) {
      // Each round turns the order around, so no system always goes first.
      const order = r % 2 === 0 ? systems : [...systems].reverse();
      for (const system of order) {
        const list = await conversations(system);
        add(system, await charged(system, () => pool(WIDTH, WIDTH, (i) => mention(system, list[i]))));
      }
    }
    print(`  ${ROUNDS} rounds of ${WIDTH} at once (${((Date.now() - t) / 1000).toFixed(0)} s):`);
    const rank = (sorted, p) => sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(p * sorted.length) - 1))];
    const tail = (values) => {
      const sorted = [...values].sort((a, b) => a - b);
      return `p90 ${rank(sorted, 0.9).toFixed(0)} ms, max ${sorted.at(-1).toFixed(0)} ms`;
    };
    const missing = (t) => (t.refused || t.lost ? `; ${t.lost} replies given up, ${t.refused} events refused` : "");
    const [o, p, s] = systems.map((x) => tallies.get(x));
    const [om, pm, sm] = [o, p, s].map((x) => summary(x.beyond).median);
    print(row(`${peer.name}: event → reply beyond the floor`, summary(p.beyond), "ms", `${tail(p.beyond)}${missing(p)}`));
    print(row(`${ours.name}: event → reply beyond the floor`, summary(o.beyond), "ms", `${tail(o.beyond)}; median ${(om / pm).toFixed(2)}× the Chat SDK${missing(o)}`, { text: "≤ 3× (median)", met: om <= 3 * pm && !o.lost && !o.refused }));
    // The Chat SDK looks a thread's parent up twice a turn (the forwarded event names no parent, its cache is filled
    // only at the second): what it would take without them, the fake's time for each taken off its figure.
    const lookups = p.calls.filter((c) => c.kind === "lookup").length / p.turns;
    const pl = pm - lookups * discordMs;
    print(row(`${peer.name}, without its channel look-ups (estimate)`, { value: pl }, "ms", `median less ${Number(lookups.toFixed(2))} × ${discordMs} ms; ours ${(om / pl).toFixed(2)}× this`));
    print(row(`${spread.name}: event → reply beyond the floor`, summary(s.beyond), "ms", `${tail(s.beyond)}; one channel is ${(om / sm).toFixed(2)}× this${missing(s)}`));
    for (const system of systems) {
      const x = tallies.get(system);
      const counts = new Map();
      for (const c of x.calls) counts.set(routeOf(c), (counts.get(routeOf(c)) ?? 0) + 1);
      const byRoute = [...counts].map(([route, n]) => `${route} ${Number((n / x.turns).toFixed(2))}`).join(", ");
      print(row(`${system.name}: Discord calls per turn`, { value: x.calls.length / x.turns }, "", byRoute));
    }
    const cpu = (x) => x.cpu / x.turns;
    print(row(`${peer.name}: CPU per turn (its Node process)`, { value: cpu(p) }, "ms"));
    print(row(`${ours.name}: CPU per turn (workerd runtime)`, { value: cpu(o) }, "ms", `${(cpu(o) / cpu(p)).toFixed(2)}× the Chat SDK`));
    print(row(`${spread.name}: CPU per turn (workerd runtime)`, { value: cpu(s) }, "ms"));
    await whereItGoes();
    print(`  load average at the end: ${bench.loadavg()}`);
  } finally {
    closed = true;
    await giveUp;
    answers.delete(told);
    app.stop();
  }
}

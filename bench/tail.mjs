// The tail section of `npm run bench`: one conversation driven to turn
// BENCH_TAIL_TURNS through the Agents API on a model with a small window
// (compaction happens every few turns), against a young conversation of the
// same agent, interleaved: turn ~200's busy time and latency as ratios to turn
// ~10's. A turn reads only the tail since the last compaction (and its own
// rows), so neither may grow with the stored log.
import { setTimeout as sleep } from "node:timers/promises";

/** The model of the tenant: the fake provider's, with a window small enough that a few turns fill it. */
export const TAIL_MODEL = "small-window";
export const TAIL_WINDOW = 8000;

const TURNS = Number(process.env.BENCH_TAIL_TURNS ?? 200);
/** Turns measured around the young turn 10 and the old turn TURNS (each window this wide, centred on them). */
const WIDTH = 10;
const YOUNG = 10;
/** A person's message: ~3,000 characters, so the 8,000-token window fills in about six turns. */
const FILLER = Array.from({ length: 780 }, (_, i) => `w${i % 89}`).join(" ");
const REPLY = `Noted. ${Array.from({ length: 60 }, (_, i) => `r${i}`).join(" ")}`;

/**
 * `bench`: the run's helpers (api, post, view, putScenario, print, row, summary, run).
 * Latency is the person's message POSTed → the reply in the transcript (its row's time,
 * as the object wrote it), so how often the bench looks does not change the figure.
 */
export async function tailSection(bench) {
  const { api, post, view, putScenario, print, row, summary, run } = bench;
  const tenant = `tail${run}`;
  const agent = "scribe";
  const res = await api(`/tenants/${tenant}/model`, { method: "PUT", body: JSON.stringify({ model: `fake/${TAIL_MODEL}` }) });
  if (res.status !== 200) throw new Error(`choosing fake/${TAIL_MODEL}: ${res.status} ${await res.text()}`);
  const sid = `tail${run}`;
  await putScenario(sid, [{ text: REPLY }]);

  /**
   * One turn: POST, then wait until it is idle; its latency from the reply's row time. The first look
   * comes after most turns have ended: a look reads the whole transcript, which costs an old
   * conversation more, and would otherwise slow the turn it measures.
   */
  const turn = async (conversation, k) => {
    const start = Date.now();
    await post(tenant, agent, conversation, `[s:${sid}] turn ${k}: ${FILLER}`);
    for (let polls = 0; ; polls++) {
      await sleep(polls === 0 ? 300 : 100);
      const v = await view(tenant, agent, conversation);
      if (v.turn === k && v.status === "idle") {
        const reply = v.transcript.findLast((e) => e.role === "assistant");
        if (!reply || reply.at < start) throw new Error(`${conversation} turn ${k} ended without a reply`);
        return reply.at - start;
      }
      if (v.status === "failed") throw new Error(`${conversation} turn ${k} failed: ${v.error}`);
      if (polls > 600) throw new Error(`${conversation} turn ${k} did not end in a minute`);
    }
  };

  const old = `old-${run}`;
  const young = `young-${run}`;
  const oldFrom = TURNS - WIDTH / 2 + 1;
  const youngFrom = YOUNG - WIDTH / 2 + 1;
  const started = Date.now();
  for (let k = 1; k < oldFrom; k++) await turn(old, k);
  for (let k = 1; k < youngFrom; k++) await turn(young, k);
  const grownS = (Date.now() - started) / 1000;
  // Interleaved: a young turn, then an old one, WIDTH times.
  const latency = { young: new Map(), old: new Map() };
  for (let i = 0; i < WIDTH; i++) {
    latency.young.set(youngFrom + i, await turn(young, youngFrom + i));
    latency.old.set(oldFrom + i, await turn(old, oldFrom + i));
  }
  const [youngView, oldView] = [await view(tenant, agent, young), await view(tenant, agent, old)];
  const busyOf = (v, turns) => [...turns.keys()].map((k) => v.busyByTurn.find((t) => t.turn === k)?.busyMs ?? 0);
  const busy = { young: summary(busyOf(youngView, latency.young)), old: summary(busyOf(oldView, latency.old)) };
  const lat = { young: summary([...latency.young.values()]), old: summary([...latency.old.values()]) };
  const compactions = oldView.transcript.filter((e) => e.role === "compaction").length;

  print(`tail: one conversation to turn ${oldFrom + WIDTH - 1} (Agents API, fake/${TAIL_MODEL}: ${TAIL_WINDOW}-token window, ~${FILLER.length} characters a message, provider answering at once) vs a young one, ${WIDTH} turns each interleaved`);
  print(`  the old conversation: ${compactions} compactions, ${oldView.transcript.length} transcript entries (grown in ${grownS.toFixed(0)} s)`);
  print(row(`baseline: busy per turn, turns ${youngFrom}–${youngFrom + WIDTH - 1}`, busy.young, "ms", `turn ${YOUNG}: ${busyOf(youngView, new Map([[YOUNG, 0]]))[0]} ms`));
  print(row(`busy per turn, turns ${oldFrom}–${oldFrom + WIDTH - 1}`, busy.old, "ms", `turn ${TURNS}: ${busyOf(oldView, new Map([[TURNS, 0]]))[0]} ms; ${(busy.old.median / busy.young.median).toFixed(2)}×`, { text: "≤ 1.3× (median)", met: busy.old.median <= 1.3 * busy.young.median }));
  print(row(`baseline: latency (POST → reply), turns ${youngFrom}–${youngFrom + WIDTH - 1}`, lat.young, "ms", `turn ${YOUNG}: ${latency.young.get(YOUNG)} ms`));
  print(row(`latency (POST → reply), turns ${oldFrom}–${oldFrom + WIDTH - 1}`, lat.old, "ms", `turn ${TURNS}: ${latency.old.get(TURNS)} ms; ${(lat.old.median / lat.young.median).toFixed(2)}×`, { text: "≤ 1.3× (median)", met: lat.old.median <= 1.3 * lat.young.median }));
}

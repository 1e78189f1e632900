// The scale section of `npm run bench`: calls into Durable Objects per plain
// turn, by object class, and how much of them the one hottest object takes, at
// two tenant counts (the figures docs/scale.md's load model is computed from).
// Its own wrangler dev counts every call on a stub (COUNT_OBJECT_CALLS,
// lib/object-calls.ts); the counts are read at GET /v1/object-calls before and
// after each batch of turns, so only the batch's calls are in a figure. The
// tenants are webhook tenants, each with its own secret and callback URL; a
// plain turn is a signed message answered by the model with text, no tools.
// Each tenant's first turn is counted apart from its later (warm) ones. An
// object is shared by all tenants when its name names none of them.
//
// On a turn's way, or in the background: the platform's ledger's `takeSpend`
// is called by a tenant's ledger from its alarm, a batched report of the spend
// counted since its last one, at most one per tenant ledger every
// SPEND_REPORT_EVERY_MS (10 s; runtime/metering/ledger.ts), not by the turn;
// the provider gate's `isOpen` is asked behind a call, not awaited, when this
// isolate's view of the key's open gate is a second old
// (runtime/models/open-gates.ts). The counts do not say who called, so the
// bench tells them apart by method name (BACKGROUND, below); every other call
// into a shared object is on a turn's way (the gate's `admit`, asked before a
// call while this isolate has not heard the gate open). A batch's
// counts are read once SPEND_REPORT_EVERY_MS and a margin have passed since
// its last reply and they stopped moving, so every report of the batch's
// turns is in it (and none is left for the next).
//
// The busy shape: the small count's tenants each make BUSY_TURNS turns in a
// row, well within one report window; a tenant's reports (and the gate's asks)
// are then shared by its turns, and fall per turn as its turns grow.
import { createHmac } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import { startCallbackReceiver } from "../test/fakes/callback.mjs";

/** The two tenant counts, smaller first (BENCH_SCALE_TENANTS=20,100). */
const COUNTS = (process.env.BENCH_SCALE_TENANTS ?? "20,100").split(",").map(Number);
if (COUNTS.length !== 2 || !(COUNTS[0] > 0 && COUNTS[1] > COUNTS[0])) throw new Error(`BENCH_SCALE_TENANTS: two tenant counts, smaller first (got ${process.env.BENCH_SCALE_TENANTS})`);
const WIDTH = Number(process.env.BENCH_SCALE_WIDTH ?? 8);
const MODEL_MS = 100;
/** Turns a tenant makes in a row in the busy shape (BENCH_SCALE_BUSY_TURNS). */
const BUSY_TURNS = Number(process.env.BENCH_SCALE_BUSY_TURNS ?? 5);
/** A tenant's ledger reports its spend to the platform's at most this often (SPEND_REPORT_EVERY_MS, runtime/metering/ledger.ts). */
const REPORT_EVERY_MS = 10_000;
/** Calls into shared objects that are not on a turn's way: a tenant's ledger's alarm reporting its spend (class and method). */
const BACKGROUND = new Set(["Ledger\ttakeSpend", "ProviderGate\tisOpen"]);
const isBackground = (o) => BACKGROUND.has(`${o.objectClass}\t${o.method}`);

/** The variables the section's wrangler dev runs with. */
export const SCALE_VARS = { COUNT_OBJECT_CALLS: "true", WEBHOOK_SECRET: "bench-webhook-secret", WEBHOOK_TENANT_SECRETS_KEY: "bench-webhook-tenant-secrets-key" };

/**
 * `bench`: { url (the section's wrangler dev), admin (its token), provider (the fake model's control),
 * print, row, pool, run }.
 */
export async function scaleSection(bench) {
  const { url, admin, provider, print, row, pool, run } = bench;
  const callbacks = await startCallbackReceiver();
  const prefix = `scale${run}x`;
  const tenants = Array.from({ length: COUNTS[1] }, (_, i) => `${prefix}${i}`);
  const secrets = new Map();
  const asAdmin = { authorization: `Bearer ${admin}`, "content-type": "application/json" };
  const ok = async (res, what) => {
    if (!res.ok) throw new Error(`${what}: ${res.status} ${await res.text()}`);
    return res.json();
  };
  try {
    await fetch(`${provider}/_control/unscripted`, { method: "PUT", body: JSON.stringify({ delayMs: MODEL_MS }) });
    // Each tenant: its callback URL, then its own secret (from then on only that one verifies its events).
    await pool(tenants.length, WIDTH, async (i) => {
      const tenant = tenants[i];
      await ok(await fetch(`${url}/v1/webhook/tenants/${tenant}`, { method: "PUT", headers: asAdmin, body: JSON.stringify({ callback_url: `${callbacks.url}/hooks/${tenant}` }) }), `${tenant}'s callback URL`);
      const { secret } = await ok(await fetch(`${url}/v1/webhook/tenants/${tenant}/secret`, { method: "POST", headers: asAdmin, body: JSON.stringify({ overlap_hours: 0 }) }), `${tenant}'s secret`);
      secrets.set(tenant, secret);
      await fetch(`${callbacks.url}/_control/hooks/${tenant}`, { method: "PUT", body: JSON.stringify({ secret }) });
    });

    const counts = async () => (await ok(await fetch(`${url}/v1/object-calls`, { headers: asAdmin }), "GET /v1/object-calls")).objects;
    const replies = async (tenant) => (await ok(await fetch(`${callbacks.url}/_control/hooks/${tenant}`), "the callback's record")).deliveries.filter((d) => d.body.type === "reply").length;
    /** One signed message to the tenant's agent, in its conversation "c". */
    const message = async (tenant, k) => {
      const body = JSON.stringify({ type: "message", tenant, idempotency_key: `${tenant}-${k}`, conversation: "c", user: { id: "u1", name: "Ada" }, text: `hello ${k}` });
      const timestamp = String(Math.floor(Date.now() / 1000));
      const signature = `v1=${createHmac("sha256", secrets.get(tenant)).update(`${timestamp}.${body}`).digest("hex")}`;
      for (let attempt = 1; ; attempt++) {
        const res = await fetch(`${url}/webhook/${tenant}/events`, { method: "POST", headers: { "content-type": "application/json", "x-antiproton-timestamp": timestamp, "x-antiproton-signature": signature }, body });
        // wrangler dev's 503 "worker restarted mid-request": the same event again (its idempotency key collapses a copy).
        if (res.status === 503 && attempt < 5) {
          await sleep(200 * attempt);
          continue;
        }
        return ok(res, `${tenant}'s message ${k}`);
      }
    };

    /** Turns each tenant has made. */
    const made = new Map(tenants.map((t) => [t, 0]));
    /** `n` turns in a row of each of `batch`'s tenants, WIDTH tenants at once; the calls into objects it took (its reports included), and the longest a tenant's turns took. */
    const turns = async (batch, n = 1) => {
      const before = await counts();
      let longest = 0;
      await pool(batch.length, WIDTH, async (i) => {
        const tenant = batch[i];
        const start = Date.now();
        for (let j = 0; j < n; j++) {
          const k = made.get(tenant) + 1;
          await message(tenant, k);
          for (const deadline = Date.now() + 120_000; (await replies(tenant)) < k; await sleep(250)) {
            if (Date.now() > deadline) throw new Error(`${tenant}: no reply to message ${k} in 120 s`);
          }
          made.set(tenant, k);
        }
        longest = Math.max(longest, Date.now() - start);
      });
      // The reports of the batch's spend (each within REPORT_EVERY_MS of a count) and the status updates after each reply: settled once that time has passed and the counts have not moved for 2 s.
      await sleep(REPORT_EVERY_MS + 1000);
      let after = await counts();
      for (let still = 0; still < 2; ) {
        await sleep(1000);
        const now = await counts();
        still = total(now) === total(after) ? still + 1 : 0;
        after = now;
      }
      if (total(after) < total(before)) throw new Error("the object-call counts went down: workerd restarted during the batch, its counts are lost");
      const was = new Map(before.map((o) => [callKey(o), o.calls]));
      return { calls: after.map((o) => ({ ...o, calls: o.calls - (was.get(callKey(o)) ?? 0) })).filter((o) => o.calls > 0), longest };
    };

    /** Prints a batch's calls (by object and method) per turn by class, into shared objects (on a turn's way; in the background), and the hottest object's share. */
    const report = (label, calls, turnCount) => {
      const all = total(calls);
      const isShared = (o) => !o.object.includes(prefix);
      // A shared object's class is printed apart from the tenants' objects of the same class.
      const classOf = (o) => (isShared(o) ? `${o.objectClass} (shared)` : o.objectClass);
      const objects = merge(calls, objectKey);
      const byClass = new Map();
      for (const o of objects) {
        const c = byClass.get(classOf(o)) ?? { calls: 0, objects: 0, top: 0, methods: new Map() };
        byClass.set(classOf(o), { ...c, calls: c.calls + o.calls, objects: c.objects + 1, top: Math.max(c.top, o.calls) });
      }
      for (const m of calls) byClass.get(classOf(m)).methods.set(m.method, (byClass.get(classOf(m)).methods.get(m.method) ?? 0) + m.calls);
      const perTurn = (n) => Number((n / turnCount).toFixed(2));
      const listed = (cs) => merge(cs, callKey).map((o) => `${o.objectClass} ${o.object} ${o.method}: ${o.calls}`).join(", ") || "none";
      const onWay = calls.filter((o) => isShared(o) && !isBackground(o));
      const reports = calls.filter((o) => isShared(o) && isBackground(o));
      const hottestOf = (cs) => merge(cs, objectKey).reduce((a, b) => (b.calls > a.calls ? b : a), { calls: 0 });
      const wayCalls = calls.filter((o) => !isBackground(o));
      const [hotWay, hotAll] = [hottestOf(wayCalls), hottestOf(calls)];
      print(`  ${label} (${turnCount} turns):`);
      print(row(`calls into objects per turn`, { value: all / turnCount }, "", `${all} calls into ${objects.length} objects`));
      for (const [cls, c] of [...byClass].sort((a, b) => b[1].calls - a[1].calls)) {
        const methods = [...c.methods].sort((a, b) => b[1] - a[1]).map(([m, n]) => `${m} ${perTurn(n)}`).join(", ");
        print(row(`  ${cls}`, { value: perTurn(c.calls) }, "", `${c.objects} objects, the busiest ${c.top} calls; a turn: ${methods}`));
      }
      print(row(`shared objects, on a turn's way, per turn`, { value: perTurn(total(onWay)) }, "", listed(onWay)));
      print(row(`shared objects, in the background, per turn`, { value: perTurn(total(reports)) }, "", listed(reports)));
      print(row(`the hottest object's share of calls on a turn's way`, { value: (100 * hotWay.calls) / total(wayCalls) }, "%", `${hotWay.objectClass} ${hotWay.object}: ${hotWay.calls} of ${total(wayCalls)}`));
      print(row(`the hottest object's share, background included`, { value: (100 * hotAll.calls) / all }, "%", `${hotAll.objectClass} ${hotAll.object}: ${hotAll.calls} of ${all}`));
      const gate = calls.filter((o) => isShared(o) && o.objectClass === "ProviderGate");
      return { way: hotWay.calls / total(wayCalls), all: hotAll.calls / all, reports: total(reports) / turnCount, gate: total(gate) / turnCount };
    };
    const ratio = (name, a, b, what) => print(row(name, { value: b === 0 ? NaN : a / b }, "x", what));
    const pct = (x) => `${(100 * x).toFixed(2)} %`;

    print(`scale: webhook tenants (each its own secret and callback URL), plain turns (a signed message, the model's text answer after ${MODEL_MS} ms, no tools), ${WIDTH} at once;`);
    print(`  every call on a stub counted by the Worker and its objects (COUNT_OBJECT_CALLS=true, read at GET /v1/object-calls around each batch); shared: an object whose name names no tenant`);
    const small = tenants.slice(0, COUNTS[0]);
    const first = await turns(tenants);
    report(`each tenant's first turn, ${COUNTS[1]} tenants`, first.calls, COUNTS[1]);
    const atSmall = report(`a plain turn (each tenant's second), ${COUNTS[0]} tenants`, (await turns(small)).calls, COUNTS[0]);
    // Every tenant's next turn, each warm: the small count's third, the rest's second.
    const atLarge = report(`a plain turn, ${COUNTS[1]} tenants`, (await turns(tenants)).calls, COUNTS[1]);
    ratio(`the hottest object's share, ${COUNTS[1]} vs ${COUNTS[0]} tenants`, atLarge.way, atSmall.way, `${pct(atLarge.way)} vs ${pct(atSmall.way)} (on a turn's way): falls as tenants grow when below 1×`);
    ratio(`  the same, background included`, atLarge.all, atSmall.all, `${pct(atLarge.all)} vs ${pct(atSmall.all)} (one turn a tenant: a spend report each)`);
    const busy = await turns(small, BUSY_TURNS);
    const atBusy = report(`busy: ${COUNTS[0]} tenants, ${BUSY_TURNS} plain turns each in a row (the longest tenant's ${(busy.longest / 1000).toFixed(1)} s, one report window is ${REPORT_EVERY_MS / 1000} s)`, busy.calls, COUNTS[0] * BUSY_TURNS);
    ratio(`background calls per turn, ${BUSY_TURNS} turns a tenant vs 1`, atBusy.reports, atSmall.reports, `${atBusy.reports.toFixed(2)} vs ${atSmall.reports.toFixed(2)}: fall as a tenant's turns grow when below 1×`);
    ratio(`gate asks per turn, ${BUSY_TURNS} turns a tenant vs 1`, atBusy.gate, atSmall.gate, `${atBusy.gate.toFixed(3)} vs ${atSmall.gate.toFixed(3)}`);
    ratio(`hottest share (background incl.), busy vs 1 turn`, atBusy.all, atSmall.all, `${pct(atBusy.all)} vs ${pct(atSmall.all)}`);
  } finally {
    await callbacks.close();
  }
}

const objectKey = (o) => `${o.objectClass}\t${o.object}`;
const callKey = (o) => `${objectKey(o)}\t${o.method}`;
const total = (counts) => counts.reduce((sum, o) => sum + o.calls, 0);

/** One count per key (an object, or an object's method) from several counts. */
function merge(counts, keyOf) {
  const merged = new Map();
  for (const o of counts) merged.set(keyOf(o), { ...o, calls: (merged.get(keyOf(o))?.calls ?? 0) + o.calls });
  return [...merged.values()];
}

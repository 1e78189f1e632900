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
import { createHmac } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import { startCallbackReceiver } from "../test/fakes/callback.mjs";

/** The two tenant counts, smaller first (BENCH_SCALE_TENANTS=20,100). */
const COUNTS = (process.env.BENCH_SCALE_TENANTS ?? "20,100").split(",").map(Number);
if (COUNTS.length !== 2 || !(COUNTS[0] > 0 && COUNTS[1] > COUNTS[0])) throw new Error(`BENCH_SCALE_TENANTS: two tenant counts, smaller first (got ${process.env.BENCH_SCALE_TENANTS})`);
const WIDTH = Number(process.env.BENCH_SCALE_WIDTH ?? 8);
const MODEL_MS = 100;

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

    /** Turn `k` of each of `batch`'s tenants, WIDTH at once; the calls into objects it took, once every count stopped moving. */
    const turns = async (batch, k) => {
      const before = await counts();
      await pool(batch.length, WIDTH, async (i) => {
        const tenant = batch[i];
        await message(tenant, k);
        for (const deadline = Date.now() + 120_000; (await replies(tenant)) < k; await sleep(250)) {
          if (Date.now() > deadline) throw new Error(`${tenant}: no reply to message ${k} in 120 s`);
        }
      });
      // The reports and status updates after each reply: settled once the counts have not moved for 2 s.
      let after = await counts();
      for (let still = 0; still < 2; ) {
        await sleep(1000);
        const now = await counts();
        still = total(now) === total(after) ? still + 1 : 0;
        after = now;
      }
      if (total(after) < total(before)) throw new Error("the object-call counts went down: workerd restarted during the batch, its counts are lost");
      const was = new Map(before.map((o) => [callKey(o), o.calls]));
      return after.map((o) => ({ ...o, calls: o.calls - (was.get(callKey(o)) ?? 0) })).filter((o) => o.calls > 0);
    };

    /** Prints a batch's calls (by object and method) per turn by class, into shared objects, and the hottest object's share. */
    const report = (label, calls, turnCount) => {
      const all = total(calls);
      const objects = merge(calls, objectKey);
      const byClass = new Map();
      for (const o of objects) {
        const c = byClass.get(o.objectClass) ?? { calls: 0, objects: 0, top: 0, methods: new Map() };
        byClass.set(o.objectClass, { ...c, calls: c.calls + o.calls, objects: c.objects + 1, top: Math.max(c.top, o.calls) });
      }
      for (const m of calls) byClass.get(m.objectClass).methods.set(m.method, (byClass.get(m.objectClass).methods.get(m.method) ?? 0) + m.calls);
      const perTurn = (n) => Number((n / turnCount).toFixed(2));
      const shared = objects.filter((o) => !o.object.includes(prefix));
      const hottest = objects.reduce((a, b) => (b.calls > a.calls ? b : a), { calls: 0 });
      print(`  ${label} (${turnCount} turns):`);
      print(row(`calls into objects per turn`, { value: all / turnCount }, "", `${all} calls into ${objects.length} objects`));
      for (const [cls, c] of [...byClass].sort((a, b) => b[1].calls - a[1].calls)) {
        const methods = [...c.methods].sort((a, b) => b[1] - a[1]).map(([m, n]) => `${m} ${perTurn(n)}`).join(", ");
        print(row(`  ${cls}`, { value: c.calls / turnCount }, "", `${c.objects} objects, the busiest ${c.top} calls; a turn: ${methods}`));
      }
      print(row(`into objects shared by all tenants, per turn`, { value: total(shared) / turnCount }, "", shared.map((o) => `${o.objectClass} ${o.object}: ${o.calls}`).join(", ") || "none"));
      print(row(`the hottest object's share of all calls`, { value: (100 * hottest.calls) / all }, "%", `${hottest.objectClass} ${hottest.object}: ${hottest.calls} of ${all}`));
      return { share: hottest.calls / all };
    };

    print(`scale: webhook tenants (each its own secret and callback URL), plain turns (a signed message, the model's text answer after ${MODEL_MS} ms, no tools), ${WIDTH} at once;`);
    print(`  every call on a stub counted by the Worker and its objects (COUNT_OBJECT_CALLS=true, read at GET /v1/object-calls around each batch); shared: an object whose name names no tenant`);
    const [small, rest] = [tenants.slice(0, COUNTS[0]), tenants.slice(COUNTS[0])];
    const first = [await turns(small, 1), await turns(rest, 1)].flat();
    report(`each tenant's first turn, ${COUNTS[1]} tenants`, merge(first, callKey), COUNTS[1]);
    const atSmall = report(`a plain turn (each tenant's second), ${COUNTS[0]} tenants`, await turns(small, 2), COUNTS[0]);
    // Every tenant's next turn, each warm: the small count's third, the rest's second.
    const warm = [await turns(small, 3), await turns(rest, 2)].flat();
    const atLarge = report(`a plain turn, ${COUNTS[1]} tenants`, merge(warm, callKey), COUNTS[1]);
    print(row(`the hottest object's share, ${COUNTS[1]} vs ${COUNTS[0]} tenants`, { value: atLarge.share / atSmall.share }, "x", `${(100 * atLarge.share).toFixed(2)} % vs ${(100 * atSmall.share).toFixed(2)} %: falls as tenants grow when below 1×`));
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

// The platform's total (runtime/metering/ledger.ts, issue 39): no call writes
// the platform's ledger; each tenant's ledger reports the operator-paid spend
// it counted in sums, at most every SPEND_REPORT_EVERY_MS, from its alarm, and
// the platform's ledger takes each report once, whatever is retried. Each test
// counts on a day of its own (long past), so the platform's row of that day is
// the test's alone.
import { runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { DAY_MS, dayStart, ledgerStub, SPEND_REPORT_EVERY_MS } from "../../../runtime/metering/index.ts";
import { postMessage, providerRequests, script, settled, unique, waitFor, withVars } from "../../support.ts";

/** The start of a UTC day between 1980 and 2020 no other test counts on. */
function dayOfItsOwn(): number {
  return Date.UTC(1980, 0, 1) + Math.floor(Math.random() * 40 * 365) * DAY_MS;
}

function answer(tenant: string, day: number, n: number, byok = false) {
  const call = unique(`call${n}-`);
  return { call, tenant, agent: "a", model: "fake/test-model", at: day + 60_000 + n, byok, inputTokens: 10, cacheReadTokens: 0, cacheWriteTokens: 0, outputTokens: 1, costUsd: 0.25, child: false };
}

/** The platform's row of a day: calls and cost the tenants reported for it. */
function platformDay(day: number): Promise<{ calls: number; cost: number } | undefined> {
  return runInDurableObject(ledgerStub(env), (_instance, state) =>
    state.storage.sql.exec<{ calls: number; cost: number }>("SELECT calls, cost FROM platform_spend WHERE day = ?", day).toArray()[0],
  );
}

/** The reports the platform's ledger took from a tenant's ledger: the number of the last. */
function reportsTaken(tenant: string): Promise<number> {
  const source = ledgerStub(env, tenant).id.toString();
  return runInDurableObject(ledgerStub(env), (_instance, state) => state.storage.sql.exec<{ seq: number }>("SELECT seq FROM spend_sources WHERE source = ?", source).toArray()[0]?.seq ?? 0);
}

describe("the platform's total, reported by the tenants' ledgers", () => {
  it(`20 calls counted: the platform's ledger takes one report, at most ${SPEND_REPORT_EVERY_MS / 1000} s after the first, by the tenant ledger's own alarm`, async () => {
    const tenant = unique("spend");
    const day = dayOfItsOwn();
    const ledger = ledgerStub(env, tenant);
    const first = Date.now();
    expect(await ledger.count(answer(tenant, day, 0))).toBe(true);
    const firstCounted = Date.now();
    for (let n = 1; n < 20; n++) expect(await ledger.count(answer(tenant, day, n))).toBe(true);
    // A call paid with the tenant's own key is not the operator's: it is not reported.
    expect(await ledger.count(answer(tenant, day, 20, true))).toBe(true);
    // The report is due within the interval of the first count, however many follow (a busy tenant does not put it off).
    const due = await runInDurableObject(ledger, (_instance, state) => state.storage.getAlarm());
    expect(due).not.toBeNull();
    expect(due!).toBeLessThanOrEqual(firstCounted + SPEND_REPORT_EVERY_MS);
    expect(await platformDay(day)).toBeUndefined();
    const taken = await waitFor("the platform's figure", async () => (await platformDay(day))?.calls === 20 && Date.now(), SPEND_REPORT_EVERY_MS + 10_000);
    expect(taken - first).toBeLessThan(SPEND_REPORT_EVERY_MS + 5_000);
    expect((await platformDay(day))!.cost).toBeCloseTo(20 * 0.25, 9);
    // Twenty calls, one write to the platform's ledger.
    expect(await reportsTaken(tenant)).toBe(1);
  }, 30_000);

  it("a report sent again (the tenant's ledger cut short before it knew the platform's took it) is taken once; the next one adds", async () => {
    const tenant = unique("spend");
    const day = dayOfItsOwn();
    const ledger = ledgerStub(env, tenant);
    for (let n = 0; n < 3; n++) await ledger.count(answer(tenant, day, n));
    expect(await runDurableObjectAlarm(ledger)).toBe(true);
    expect(await platformDay(day)).toEqual({ calls: 3, cost: 0.75 });
    // As if the object had stopped after the platform's ledger took the report and before it marked it sent.
    await runInDurableObject(ledger, async (_instance, state) => {
      state.storage.sql.exec("UPDATE spend_reports SET sent = 0");
      await state.storage.setAlarm(Date.now() + 60_000);
    });
    expect(await runDurableObjectAlarm(ledger)).toBe(true);
    expect(await platformDay(day)).toEqual({ calls: 3, cost: 0.75 });
    expect(await reportsTaken(tenant)).toBe(1);
    // The same answer counted again is not reported again; a new one is, in the next report.
    const again = answer(tenant, day, 0);
    expect(await ledger.count(again)).toBe(true);
    expect(await ledger.count(again)).toBe(false);
    expect(await runDurableObjectAlarm(ledger)).toBe(true);
    expect(await platformDay(day)).toEqual({ calls: 4, cost: 1 });
    expect(await reportsTaken(tenant)).toBe(2);
  });

  it("spend left unreported with no alarm (the ledger stopped between a count and setting it) is reported once the ledger wakes", async () => {
    const tenant = unique("spend");
    const day = dayOfItsOwn();
    const ledger = () => ledgerStub(env, tenant);
    await ledger().count(answer(tenant, day, 0));
    await runInDurableObject(ledger(), (_instance, state) => state.storage.deleteAlarm());
    await runInDurableObject(ledger(), (_instance, state) => state.abort("stopped by the test")).catch(() => undefined);
    // Any call wakes it: a reading, here.
    await ledger().reading();
    expect(await runInDurableObject(ledger(), (_instance, state) => state.storage.getAlarm())).not.toBeNull();
    expect(await runDurableObjectAlarm(ledger())).toBe(true);
    expect(await platformDay(day)).toEqual({ calls: 1, cost: 0.25 });
  });

  it("the platform's limit is checked on a figure kept at most 20 s, so a report is seen by the check within 30 s of the spend", async () => {
    const tenant = unique("spend");
    const ask = async () => {
      const s = unique("ask");
      await script(s, [{ text: "answered", usage: { input: 10, cached: 0, output: 1 } }]);
      await postMessage(tenant, "a", { text: `[s:${s}] hi`, conversation: s });
      const view = await settled(tenant, "a", s);
      return { status: view.status, reached: (await providerRequests(s)).length };
    };
    const platform = (await ledgerStub(env).reading()).spentUsd;
    await withVars({ PLATFORM_DAILY_SPEND_LIMIT_USD: String(platform + 1) }, async () => {
      // This isolate reads the platform's figure now (no test before this one in the file checked a limit).
      expect(await ask()).toEqual({ status: "idle", reached: 1 });
      // Another tenant's ledger reports $5 (as if its calls were made in another isolate).
      expect(await ledgerStub(env).takeSpend(unique("another-ledger"), 1, [{ day: dayStart(Date.now()), calls: 1, costUsd: 5 }])).toBe(true);
      // Past 20 s the figure is read again: the platform is over its limit.
      await new Promise((resolve) => setTimeout(resolve, 21_000));
      expect(await ask()).toEqual({ status: "failed", reached: 0 });
    });
  }, 40_000);
});

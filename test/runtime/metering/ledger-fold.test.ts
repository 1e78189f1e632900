// The ledger's fold (runtime/metering/ledger.ts, issue 24): the daily Cron
// Trigger folds every ledger's hours older than 35 days into days; every total
// (per tenant, agent, model, day) and what the Agents API reads over any range
// of whole days are the same before and after; recent hours stay hours; a
// second fold changes nothing.
import { createExecutionContext, createScheduledController, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { DAY_MS, FOLD_AFTER_MS, ledgerStub, type UsageRowOut } from "../../../runtime/metering/index.ts";
import { recordAgent, type UsageTotals } from "../../../runtime/index.ts";
import { unique, worker } from "../../support.ts";
import handler from "../../worker-under-test.ts";

const HOUR_MS = 3_600_000;
const ADMIN = { authorization: "Bearer test-admin-token" };

interface UsageAnswer {
  totals: UsageTotals;
  usage: (Omit<UsageRowOut, "hour"> & { hour: string })[];
  busy: { hour: string; span: string; agent: string; busyMs: number; passes: number; outsideTurns: Record<string, number> }[];
  machines: { hour: string; span: string; size: string; machines: number; seconds: number; costUsd: number }[];
}

async function usage(tenant: string, from: number, to: number): Promise<UsageAnswer> {
  const iso = (ms: number) => new Date(ms).toISOString();
  const res = await worker(`/v1/tenants/${tenant}/usage?from=${iso(from)}&to=${iso(to)}`, { headers: ADMIN });
  expect(res.status).toBe(200);
  return res.json();
}

/** Sums of a report's usage rows per (agent, model, UTC day, byok): what a fold must keep. */
function perDay(answer: UsageAnswer): Record<string, number[]> {
  const sums: Record<string, number[]> = {};
  for (const row of answer.usage) {
    const key = `${row.agent} ${row.model} ${new Date(row.hour).toISOString().slice(0, 10)} ${row.byok}`;
    const values = [row.calls, row.inputTokens, row.cachedInputTokens, row.cacheWriteTokens, row.outputTokens, row.costUsd, row.childCalls, row.childCostUsd];
    sums[key] = (sums[key] ?? values.map(() => 0)).map((sum, i) => sum + values[i]!);
  }
  return sums;
}

function expectSame(after: Record<string, number[]>, before: Record<string, number[]>): void {
  expect(Object.keys(after).sort()).toEqual(Object.keys(before).sort());
  for (const [key, values] of Object.entries(before)) values.forEach((v, i) => expect(Math.abs(after[key]![i]! - v), key).toBeLessThan(1e-9));
}

describe("the ledger's fold into days", () => {
  it("the daily cron folds hours older than 35 days into days; totals per tenant, agent, model and day read the same", async () => {
    const tenant = unique("fold");
    await recordAgent(env, { tenant, agent: "a" });
    const ledger = ledgerStub(env, tenant);
    const now = Date.now();
    const today = Math.floor(now / DAY_MS) * DAY_MS;
    // Hours of three old days (40–42 days ago) and of two recent ones, two models, two agents, a BYOK call, some calls a child run's.
    let n = 0;
    for (const daysAgo of [42, 41, 40, 10, 1]) {
      for (const hour of [0, 5, 13, 23]) {
        for (const [agent, model, byok] of [["a", "fake/m1", false], ["a", "fake/m2", false], ["b", "fake/m1", true]] as const) {
          n++;
          const at = today - daysAgo * DAY_MS + hour * HOUR_MS + 1_000;
          await ledger.count({ call: `${tenant}:${n}`, tenant, agent, model, at, byok, inputTokens: 100 + n, cacheReadTokens: n, cacheWriteTokens: 2 * n, outputTokens: 10 + n, costUsd: 0.0001 * n + 1e-7 / 3, child: n % 4 === 0 });
        }
      }
    }
    // Busy hours as the objects shipped them (within their 35 days then), with the part that served no turn.
    await runInDurableObject(ledger, (_instance, state) => {
      for (const daysAgo of [41, 40, 1]) {
        for (const hour of [2, 9]) {
          const at = today - daysAgo * DAY_MS + hour * HOUR_MS;
          state.storage.sql.exec("INSERT INTO busy (tenant, agent, hour, busy_ms, passes, handlers) VALUES (?, 'a', ?, ?, 3, 7)", tenant, at, 12.5 + hour);
          state.storage.sql.exec("INSERT INTO busy_outside (tenant, agent, hour, part, busy_ms) VALUES (?, 'a', ?, 'pass', ?)", tenant, at, 1.25 + hour);
        }
      }
    });
    // Machines' spans, each across two hours (an old day's and a recent one's).
    for (const daysAgo of [41, 1]) {
      const startedAt = today - daysAgo * DAY_MS + 2 * HOUR_MS - 30 * 60_000;
      expect(await ledger.countHeld({ span: `${tenant}:m${daysAgo}`, tenant, agent: "a", size: "1 vCPU, 512 MiB, 64 MiB disk", startedAt, endedAt: startedAt + 90 * 60_000, costUsd: 0.3 })).toBe(true);
    }
    const from = today - 45 * DAY_MS;
    const to = today + DAY_MS;
    const before = await usage(tenant, from, to);
    expect(before.usage.every((row) => row.span === "hour")).toBe(true);

    // The Worker's scheduled handler, as the Cron Trigger calls it.
    await handler.scheduled!(createScheduledController({ scheduledTime: now, cron: "17 3 * * *" }), env, createExecutionContext());

    const after = await usage(tenant, from, to);
    const line = Math.floor((now - FOLD_AFTER_MS) / DAY_MS) * DAY_MS;
    // Old hours became days; recent ones stayed hours.
    for (const row of after.usage) expect(row.span, row.hour).toBe(Date.parse(row.hour) < line ? "day" : "hour");
    expect(after.usage.filter((row) => row.span === "day")).toHaveLength(3 * 3);
    expect(after.usage.filter((row) => row.span === "hour")).toHaveLength(2 * 4 * 3);
    const stored = await runInDurableObject(ledger, (_instance, state) => state.storage.sql.exec<{ n: number }>("SELECT COUNT(*) AS n FROM usage WHERE hour < ?", line).one().n);
    expect(stored).toBe(0);
    // Every total the same: per (agent, model, day, byok), the range's, and busy time with its parts.
    expectSame(perDay(after), perDay(before));
    for (const key of Object.keys(before.totals) as (keyof UsageTotals)[]) expect(Math.abs(after.totals[key] - before.totals[key]), key).toBeLessThan(1e-9);
    const busyOf = (answer: UsageAnswer) => answer.busy.reduce((sum, row) => [sum[0]! + row.busyMs, sum[1]! + row.passes, sum[2]! + (row.outsideTurns.pass ?? 0)], [0, 0, 0]);
    expect(busyOf(after)).toEqual(busyOf(before));
    expect(after.busy.filter((row) => row.span === "day")).toHaveLength(2);
    // A machine's span was split over its two hours; the old day's became one day row, with the whole span.
    expect(before.machines.map((row) => [row.span, row.machines, row.seconds])).toEqual([["hour", 0, 1800], ["hour", 1, 3600], ["hour", 0, 1800], ["hour", 1, 3600]]);
    expect(after.machines.map((row) => [row.span, row.machines, row.seconds])).toEqual([["day", 1, 5400], ["hour", 0, 1800], ["hour", 1, 3600]]);
    // A range of one old day reads that day whole.
    const oldDay = today - 41 * DAY_MS;
    expectSame(perDay(await usage(tenant, oldDay, oldDay + DAY_MS)), Object.fromEntries(Object.entries(perDay(before)).filter(([key]) => key.includes(new Date(oldDay).toISOString().slice(0, 10)))));

    // A second fold has nothing to fold and changes nothing.
    expect(await ledger.fold(now)).toBe(0);
    expectSame(perDay(await usage(tenant, from, to)), perDay(before));
  });
});

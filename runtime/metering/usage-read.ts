// A tenant's usage read from its ledger (runtime/metering/ledger.ts): totals over a
// range, today's reading and the limit that applies. What the Agents API's
// usage routes, the console and `status` show.
import { dayStart, ledgerStub, type LedgerReading, type TokenCounts, type UsageReport } from "./ledger.ts";
import { effectiveLimit } from "./spend.ts";

export interface UsageTotals extends TokenCounts {
  /** Of costUsd, what was paid with the tenant's own key. */
  byokCostUsd: number;
  busyMs: number;
  /** Machines ended, their seconds and their cost (not in costUsd, which is the models'). */
  machines: number;
  machineSeconds: number;
  machineCostUsd: number;
}

/** Sums a report's rows. */
export function totalsOf(report: UsageReport): UsageTotals {
  const totals: UsageTotals = { calls: 0, inputTokens: 0, cachedInputTokens: 0, cacheWriteTokens: 0, outputTokens: 0, costUsd: 0, byokCostUsd: 0, busyMs: 0, machines: 0, machineSeconds: 0, machineCostUsd: 0 };
  for (const row of report.usage) {
    totals.calls += row.calls;
    totals.inputTokens += row.inputTokens;
    totals.cachedInputTokens += row.cachedInputTokens;
    totals.cacheWriteTokens += row.cacheWriteTokens;
    totals.outputTokens += row.outputTokens;
    totals.costUsd += row.costUsd;
    if (row.byok) totals.byokCostUsd += row.costUsd;
  }
  for (const row of report.busy) totals.busyMs += row.busyMs;
  for (const row of report.machines) {
    totals.machines += row.machines;
    totals.machineSeconds += row.seconds;
    totals.machineCostUsd += row.costUsd;
  }
  return totals;
}

export interface UsageRead {
  report: UsageReport;
  reading: LedgerReading;
  effective: { dailyUsd: number | null; exempt: boolean };
}

/** A tenant's usage in [from, to), with today's reading and the limit that applies: what the console shows. */
export async function readUsage(env: Env, tenant: string, from: number, to: number): Promise<UsageRead> {
  const ledger = ledgerStub(env, tenant);
  const [report, reading] = await Promise.all([ledger.report(from, to), ledger.reading()]);
  return { report, reading, effective: effectiveLimit(env, reading.limit) };
}

/** Prompt tokens with the cached share, and output tokens, as `status` says them. */
export function tokensText(input: number, cached: number, output: number): string {
  const prompt = input + cached;
  const share = prompt > 0 ? ` (${Math.round((100 * cached) / prompt)}% cached)` : "";
  return `${prompt} tokens in${share}, ${output} out`;
}

/** The tenant's day (UTC) from its ledger, as a line for `status`; a ledger out of reach is said so. */
export async function tenantDayLine(env: Env, tenant: string): Promise<string> {
  try {
    const { report, reading, effective: limit } = await readUsage(env, tenant, dayStart(Date.now()), Date.now() + 1);
    const t = totalsOf(report);
    const spend = limit.exempt ? "(exempt from limits)" : limit.dailyUsd === null ? "(no daily limit)" : `of a $${limit.dailyUsd.toFixed(2)} daily limit`;
    const byok = t.byokCostUsd > 0 ? ` ($${t.byokCostUsd.toFixed(4)} of it on the tenant's own key)` : "";
    const machines = t.machineSeconds > 0 ? `; machines ${Math.round(t.machineSeconds)} s, $${t.machineCostUsd.toFixed(4)}` : "";
    return `Tenant ${tenant} today (UTC): ${t.calls} model calls, ${tokensText(t.inputTokens, t.cachedInputTokens, t.outputTokens)}, $${t.costUsd.toFixed(4)}${byok}${machines}; spent $${reading.spentUsd.toFixed(4)} ${spend}; object busy ${Math.round(t.busyMs)} ms.`;
  } catch (err) {
    console.error(`status: the ledger of tenant ${tenant} could not be read`, err);
    return `Tenant ${tenant} today: the usage ledger could not be read.`;
  }
}

// The usage ledger through the Agents API: a tenant's usage and busy time per
// hour, and its daily spend limit (runtime/ledger.ts, runtime/metering.ts).
import type { Hono } from "hono";
import { z } from "zod";
import { HttpError, parseJson, readBody } from "../lib/http.ts";
import { platformDailySpendLimit } from "./config.ts";
import { parseRoute } from "./ingress.ts";
import { DAY_MS, dayStart, ledgerStub, tenantLimitSchema, type LedgerReading, type TokenCounts, type UsageReport } from "./ledger.ts";
import { effectiveLimit, forgetReading } from "./metering.ts";

/** The longest range one request may ask for. */
const MAX_RANGE_DAYS = 400;

const instant = z
  .union([z.iso.datetime({ offset: true }), z.iso.date()], { error: "a date (2026-12-01) or an ISO 8601 time (2026-12-01T10:00:00Z)" })
  .transform((text) => Date.parse(text.length === 10 ? `${text}T00:00:00Z` : text));

const rangeQuery = z
  .object({ from: instant.optional(), to: instant.optional() })
  .strict()
  .transform(({ from, to }) => ({ from: from ?? dayStart(Date.now()), to: to ?? Date.now() }))
  .refine(({ from, to }) => from < to, "from must be before to")
  .refine(({ from, to }) => to - from <= MAX_RANGE_DAYS * DAY_MS, `the range may be at most ${MAX_RANGE_DAYS} days`);

export interface UsageTotals extends TokenCounts {
  /** Of costUsd, what was paid with the tenant's own key. */
  byokCostUsd: number;
  busyMs: number;
}

/** Sums a report's rows. */
export function totalsOf(report: UsageReport): UsageTotals {
  const totals: UsageTotals = { calls: 0, inputTokens: 0, cachedInputTokens: 0, cacheWriteTokens: 0, outputTokens: 0, costUsd: 0, byokCostUsd: 0, busyMs: 0 };
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

export function usageRoutes(api: Hono<{ Bindings: Env }>): void {
  api.get("/tenants/:tenant/usage", async (c) => {
    const { tenant } = parseRoute(c.req.param("tenant"), "any");
    const parsed = rangeQuery.safeParse(c.req.query());
    if (!parsed.success) throw new HttpError(400, `bad usage range: ${z.prettifyError(parsed.error)}`);
    const { from, to } = parsed.data;
    const { report, reading, effective } = await readUsage(c.env, tenant, from, to);
    const iso = (ms: number) => new Date(ms).toISOString();
    return c.json({
      tenant,
      from: iso(from),
      to: iso(to),
      totals: totalsOf(report),
      usage: report.usage.map((row) => ({ ...row, hour: iso(row.hour) })),
      busy: report.busy.map((row) => ({ ...row, hour: iso(row.hour) })),
      today: { spentUsd: reading.spentUsd, ...effective, platformDailyUsd: platformDailySpendLimit(c.env) },
    });
  });

  api.get("/tenants/:tenant/limits", async (c) => {
    const { tenant } = parseRoute(c.req.param("tenant"), "any");
    const reading = await ledgerStub(c.env, tenant).reading();
    return c.json({ tenant, own: reading.limit, effective: effectiveLimit(c.env, reading.limit), spentTodayUsd: reading.spentUsd });
  });

  api.put("/tenants/:tenant/limits", async (c) => {
    const { tenant } = parseRoute(c.req.param("tenant"), "any");
    const raw = await readBody(c, { contentTypes: ["application/json"], maxBytes: 4096 });
    const parsed = tenantLimitSchema.safeParse(parseJson(raw));
    if (!parsed.success) throw new HttpError(422, z.prettifyError(parsed.error));
    await ledgerStub(c.env, tenant).setLimit(parsed.data);
    forgetReading(tenant);
    return c.json({ ok: true, tenant, own: parsed.data, effective: effectiveLimit(c.env, parsed.data) });
  });

  api.delete("/tenants/:tenant/limits", async (c) => {
    const { tenant } = parseRoute(c.req.param("tenant"), "any");
    await ledgerStub(c.env, tenant).setLimit(null);
    forgetReading(tenant);
    return c.json({ ok: true, tenant, effective: effectiveLimit(c.env, null) });
  });
}

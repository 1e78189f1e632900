// The usage ledger through the Agents API: a tenant's usage and busy time per
// hour, and its daily spend limit (runtime/metering/usage-read.ts, runtime/metering/spend.ts).
import type { Hono } from "hono";
import * as z from "zod";
import { HttpError, parseJson, readBody } from "../../lib/http.ts";
import { platformDailySpendLimit, DAY_MS, dayStart, ledgerStub, tenantLimitSchema, effectiveLimit, readUsage, totalsOf } from "../metering/index.ts";
import { parseRoute } from "./ingress.ts";
import { setTenantLimit } from "./settings.ts";

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
    await setTenantLimit(c.env, tenant, parsed.data);
    return c.json({ ok: true, tenant, own: parsed.data, effective: effectiveLimit(c.env, parsed.data) });
  });

  api.delete("/tenants/:tenant/limits", async (c) => {
    const { tenant } = parseRoute(c.req.param("tenant"), "any");
    await setTenantLimit(c.env, tenant, null);
    return c.json({ ok: true, tenant, effective: effectiveLimit(c.env, null) });
  });
}

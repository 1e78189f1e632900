// The usage ledger through the Agents API: a tenant's usage and busy time per
// hour, and its daily spend limit (runtime/metering/usage-read.ts, runtime/metering/spend.ts).
import type { Hono } from "hono";
import * as z from "zod";
import type { RouteDoc } from "../../lib/route-doc.ts";
import { errors, serve } from "../../lib/serve-route.ts";
import { platformDailySpendLimit, DAY_MS, dayStart, ledgerStub, tenantLimitSchema, effectiveLimit, readUsage, totalsOf } from "../metering/index.ts";
import { withinBounds } from "../access/index.ts";
import { tenantParams } from "./schemas.ts";
import { setTenantLimit } from "./settings.ts";

/** The longest range one request may ask for. */
const MAX_RANGE_DAYS = 400;

const instant = z
  .union([z.iso.datetime({ offset: true }), z.iso.date()], { error: "a date (2026-12-01) or an ISO 8601 time (2026-12-01T10:00:00Z)" })
  .transform((text) => Date.parse(text.length === 10 ? `${text}T00:00:00Z` : text));

/** From the start of today (UTC) to now when left out. */
const rangeQuery = z
  .object({ from: instant.optional().meta({ examples: ["2026-12-01"] }), to: instant.optional() })
  .strict()
  .refine(({ from, to }) => (from ?? dayStart(Date.now())) < (to ?? Date.now()), "from must be before to")
  .refine(({ from, to }) => (to ?? Date.now()) - (from ?? dayStart(Date.now())) <= MAX_RANGE_DAYS * DAY_MS, `the range may be at most ${MAX_RANGE_DAYS} days`);

const limitShape = z.object({ dailyUsd: z.number().nullable(), exempt: z.boolean() });
const effectiveShape = z.looseObject({ dailyUsd: z.number().nullable() });

const usage = {
  method: "get",
  path: "/tenants/{tenant}/usage",
  summary: "A tenant's usage and busy time per hour over a range, and today's spend against its limit",
  params: tenantParams,
  query: rangeQuery,
  responses: {
    200: {
      description: "The usage.",
      schema: z.object({ tenant: z.string(), from: z.string(), to: z.string(), totals: z.looseObject({}), usage: z.array(z.looseObject({ hour: z.string() })), busy: z.array(z.looseObject({ hour: z.string() })), machines: z.array(z.looseObject({ hour: z.string(), size: z.string(), seconds: z.number() })), today: z.looseObject({ spentUsd: z.number() }) }),
    },
    ...errors(400),
  },
} satisfies RouteDoc;

const readLimits = {
  method: "get",
  path: "/tenants/{tenant}/limits",
  summary: "A tenant's daily spend limit: its own, the one in effect, and today's spend",
  params: tenantParams,
  responses: { 200: { description: "The limits.", schema: z.object({ tenant: z.string(), own: limitShape.nullable(), effective: effectiveShape, spentTodayUsd: z.number() }) }, ...errors(400) },
} satisfies RouteDoc;

const setLimits = {
  method: "put",
  path: "/tenants/{tenant}/limits",
  summary: "Set a tenant's daily spend limit (null: none of its own; exempt: the platform's limit does not apply)",
  params: tenantParams,
  body: tenantLimitSchema.meta({ examples: [{ dailyUsd: 5, exempt: false }] }),
  responses: { 200: { description: "Set.", schema: z.object({ ok: z.literal(true), tenant: z.string(), own: limitShape, effective: effectiveShape }) }, ...errors(400, 403, 413, 415) },
} satisfies RouteDoc;

const removeLimits = {
  method: "delete",
  path: "/tenants/{tenant}/limits",
  summary: "Remove a tenant's own daily spend limit",
  params: tenantParams,
  responses: { 200: { description: "Removed.", schema: z.object({ ok: z.literal(true), tenant: z.string(), effective: effectiveShape }) }, ...errors(400, 403) },
} satisfies RouteDoc;

export const usageRouteDocs: RouteDoc[] = [usage, readLimits, setLimits, removeLimits];

export function usageRoutes(api: Hono<{ Bindings: Env }>): void {
  serve(api, usage, async (c, { params: { tenant }, query }) => {
    const from = query.from ?? dayStart(Date.now());
    const to = query.to ?? Date.now();
    const { report, reading, effective } = await readUsage(c.env, tenant, from, to);
    const iso = (ms: number) => new Date(ms).toISOString();
    return c.json({
      tenant,
      from: iso(from),
      to: iso(to),
      totals: totalsOf(report),
      usage: report.usage.map((row) => ({ ...row, hour: iso(row.hour) })),
      busy: report.busy.map((row) => ({ ...row, hour: iso(row.hour) })),
      machines: report.machines.map((row) => ({ ...row, hour: iso(row.hour) })),
      today: { spentUsd: reading.spentUsd, ...effective, platformDailyUsd: platformDailySpendLimit(c.env) },
    });
  });

  serve(api, readLimits, async (c, { params: { tenant } }) => {
    const reading = await ledgerStub(c.env, tenant).reading();
    return c.json({ tenant, own: reading.limit, effective: effectiveLimit(c.env, reading.limit), spentTodayUsd: reading.spentUsd });
  });

  serve(api, setLimits, async (c, { params: { tenant }, body }) => {
    await withinBounds(c, tenant, { limit: body });
    await setTenantLimit(c.env, tenant, body);
    return c.json({ ok: true, tenant, own: body, effective: effectiveLimit(c.env, body) });
  });

  serve(api, removeLimits, async (c, { params: { tenant } }) => {
    await withinBounds(c, tenant, { limit: null });
    await setTenantLimit(c.env, tenant, null);
    return c.json({ ok: true, tenant, effective: effectiveLimit(c.env, null) });
  });
}

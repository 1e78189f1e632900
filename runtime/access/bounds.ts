// A tenant admin acts within the platform's bounds: per tenant, the platform
// may set a ceiling for the daily spend limit and a list of the models its
// admins may choose. Kept as a record of the tenant's own object (kind
// "bounds"), written with its audit row in one transaction; none set means no
// ceiling and every model the deployment knows.
// One check (checkBounds) serves /v1 and the console; the platform is not bound.
import * as z from "zod";
import { HttpError } from "../../lib/http.ts";
import { putAuditedTenantRecord, tenantRecord } from "../control/index.ts";

const BOUNDS = "bounds";

export const tenantBoundsSchema = z
  .object({
    /** The highest daily spend limit (USD) the tenant's admins may set; null: no ceiling. */
    maxDailyUsd: z.number().min(0).max(1e9).nullable().default(null),
    /** The models (`<provider>/<model>`, or `local`) the tenant's admins may choose; null: any the deployment knows. */
    models: z.array(z.string().min(1).max(200)).max(500).nullable().default(null),
  })
  .strict();
export type TenantBounds = z.output<typeof tenantBoundsSchema>;

export const NO_BOUNDS: TenantBounds = { maxDailyUsd: null, models: null };

export async function tenantBounds(env: Env, tenant: string): Promise<TenantBounds> {
  const stored = tenantBoundsSchema.safeParse(await tenantRecord(env, tenant, BOUNDS));
  return stored.success ? stored.data : NO_BOUNDS;
}

/** Sets (or with null, removes) a tenant's bounds, and its audit row by `actor` in the same transaction; returns those it replaced. */
export async function setTenantBounds(env: Env, tenant: string, bounds: TenantBounds | null, actor: string): Promise<TenantBounds> {
  const audit = { actor, action: bounds === null ? "bounds.remove" : "bounds.set", subject: `/tenants/${tenant}/bounds`, after: bounds };
  const stored = await putAuditedTenantRecord(env, tenant, BOUNDS, bounds, audit).catch((err: unknown) => {
    // The bounds and their row are one transaction: neither was written.
    console.error("bounds: a change could not be saved", tenant, err);
    throw new HttpError(503, "the bounds could not be saved with their audit row; nothing changed, repeat the request");
  });
  const before = tenantBoundsSchema.safeParse(stored);
  return before.success ? before.data : NO_BOUNDS;
}

/** What a tenant admin is about to set: a daily limit (null: none of its own) with its exemption, or a model. */
export type BoundedChange = { limit: { dailyUsd: number | null; exempt?: boolean } | null } | { model: string };

/** 403 naming the bound and its value when `change` goes past the tenant's bounds. */
export async function checkBounds(env: Env, tenant: string, change: BoundedChange): Promise<void> {
  const bounds = await tenantBounds(env, tenant);
  if ("model" in change) {
    if (bounds.models !== null && !bounds.models.includes(change.model)) {
      throw new HttpError(403, `model "${change.model}" is not on the models the platform allows this tenant (${bounds.models.join(", ") || "none"})`);
    }
    return;
  }
  const ceiling = bounds.maxDailyUsd;
  if (ceiling === null) return;
  const limit = change.limit;
  if (limit === null || limit.dailyUsd === null || limit.exempt) {
    throw new HttpError(403, `the platform caps this tenant's daily spend limit at ${ceiling} USD: set a limit of at most ${ceiling} (none, or exempt, would go past it)`);
  }
  if (limit.dailyUsd > ceiling) throw new HttpError(403, `the platform caps this tenant's daily spend limit at ${ceiling} USD: ${limit.dailyUsd} is above it`);
}

// A webhook tenant's own secret through the Agents API (mounted under
// /v1/webhook behind the access gate): rotate it (the new one is shown once,
// with until when the previous one verifies), retire the previous one now. Each change is in the tenant's audit trail, without the secret.
import type { Hono } from "hono";
import * as z from "zod";
import { HttpError } from "../../lib/http.ts";
import type { RouteDoc } from "../../lib/route-doc.ts";
import { errors, serve } from "../../lib/serve-route.ts";
import { markAudited, recordChange, requireTenantAdmin, tenantParams } from "../../runtime/index.ts";
import { retirePrevious, rotateSecret, rotationBody } from "./secrets.ts";

const secretState = z.looseObject({ tenant: z.string() });

const rotate = {
  method: "post",
  path: "/webhook/tenants/{tenant}/secret",
  summary: "Give the tenant a new webhook secret (shown once); the previous one verifies for overlap_hours more",
  params: tenantParams,
  body: rotationBody.meta({ examples: [{ overlap_hours: 24 }] }),
  responses: { 201: { description: "The new secret, and until when the previous one verifies.", schema: secretState.extend({ secret: z.string() }) }, ...errors(400, 403, 404, 413, 415) },
} satisfies RouteDoc;

const retire = {
  method: "delete",
  path: "/webhook/tenants/{tenant}/secret/previous",
  summary: "Stop the tenant's previous webhook secret verifying now",
  params: tenantParams,
  responses: { 200: { description: "Only the current secret verifies.", schema: secretState }, ...errors(400, 403, 404) },
} satisfies RouteDoc;

export const secretRouteDocs: RouteDoc[] = [rotate, retire];

export function secretRoutes(admin: Hono<{ Bindings: Env }>): void {
  serve(admin, rotate, async (c, { params: { tenant }, body }) => {
    const caller = requireTenantAdmin(c, tenant);
    const { secret, before, after } = await rotateSecret(c.env, tenant, body.overlap_hours);
    await recordChange(c.env, { tenant, actor: caller.actor, action: "webhook-secret.rotate", subject: tenant, before, after });
    markAudited(c);
    // The only time this secret is shown.
    return c.json({ tenant, secret, ...after }, 201);
  });

  serve(admin, retire, async (c, { params: { tenant } }) => {
    const caller = requireTenantAdmin(c, tenant);
    const retired = await retirePrevious(c.env, tenant);
    if (!retired) throw new HttpError(404, "no previous secret still verifies");
    await recordChange(c.env, { tenant, actor: caller.actor, action: "webhook-secret.retire", subject: tenant, ...retired });
    markAudited(c);
    return c.json({ tenant, ...retired.after });
  });
}

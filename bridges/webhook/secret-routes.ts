// A webhook tenant's own secret through the Agents API (mounted under
// /v1/webhook behind the access gate): rotate it (the new one is shown once,
// with until when the previous one verifies), retire the previous one now. Each change is in the tenant's audit trail, without the secret.
import type { Context, Hono } from "hono";
import * as z from "zod";
import { HttpError, parseJson, readBody } from "../../lib/http.ts";
import { markAudited, recordChange, requireTenantAdmin } from "../../runtime/index.ts";
import { retirePrevious, rotateSecret, rotationBody } from "./secrets.ts";

export function secretRoutes(admin: Hono<{ Bindings: Env }>, tenantParam: (c: Context) => string): void {
  admin.post("/tenants/:tenant/secret", async (c) => {
    const tenant = tenantParam(c);
    const caller = requireTenantAdmin(c, tenant);
    const raw = await readBody(c, { contentTypes: ["application/json"], maxBytes: 4096 });
    const parsed = rotationBody.safeParse(raw.trim() === "" ? {} : parseJson(raw));
    if (!parsed.success) throw new HttpError(422, z.prettifyError(parsed.error));
    const { secret, before, after } = await rotateSecret(c.env, tenant, parsed.data.overlap_hours);
    await recordChange(c.env, { tenant, actor: caller.actor, action: "webhook-secret.rotate", subject: tenant, before, after });
    markAudited(c);
    // The only time this secret is shown.
    return c.json({ tenant, secret, ...after }, 201);
  });

  admin.delete("/tenants/:tenant/secret/previous", async (c) => {
    const tenant = tenantParam(c);
    const caller = requireTenantAdmin(c, tenant);
    const retired = await retirePrevious(c.env, tenant);
    if (!retired) throw new HttpError(404, "no previous secret still verifies");
    await recordChange(c.env, { tenant, actor: caller.actor, action: "webhook-secret.retire", subject: tenant, ...retired });
    markAudited(c);
    return c.json({ tenant, ...retired.after });
  });
}

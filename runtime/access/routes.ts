// The access routes of /v1: a tenant's keys, roles and audit trail; the
// platform's admins are the admins of tenant `*`. Mounted by the Agents API (runtime/edge/api.ts) behind accessGate.
import type { Context, Hono } from "hono";
import * as z from "zod";
import { HttpError, parseJson, readBody } from "../../lib/http.ts";
import { controlPlane } from "../control/index.ts";
import { auditQuery, markAudited, readAudit } from "./audit.ts";
import { requirePlatform, requireTenant, requireTenantAdmin } from "./caller.ts";
import { mintKey } from "./keys.ts";
import { identitySchema, newKeyBody, roleBody } from "./schemas.ts";

type Ctx = Context<{ Bindings: Env }>;

/** The tenant every platform admin is kept under in the roles table. */
export const PLATFORM_TENANT = "*";
const NAME = /^[A-Za-z0-9._-]{1,128}$/;

/** The path's tenant; `*` names the platform, whose admins only ADMIN_TOKEN names (roles only). */
function tenantOf(c: Ctx): string {
  const tenant = c.req.param("tenant") ?? "";
  if (tenant === PLATFORM_TENANT && c.req.path.includes("/roles")) {
    requirePlatform(c);
    return tenant;
  }
  if (!NAME.test(tenant)) throw new HttpError(400, `invalid tenant "${tenant}"`);
  return tenant;
}

async function body<T>(c: Ctx, schema: z.ZodType<T>): Promise<T> {
  const parsed = schema.safeParse(parseJson(await readBody(c, { contentTypes: ["application/json"], maxBytes: 4096 })));
  if (!parsed.success) throw new HttpError(422, z.prettifyError(parsed.error));
  return parsed.data;
}

function identityOf(c: Ctx): string {
  const parsed = identitySchema.safeParse(c.req.param("identity"));
  if (!parsed.success) throw new HttpError(400, z.prettifyError(parsed.error));
  return parsed.data;
}

export function accessRoutes(api: Hono<{ Bindings: Env }>): void {
  api.post("/tenants/:tenant/keys", async (c) => {
    const tenant = tenantOf(c);
    const caller = requireTenantAdmin(c, tenant);
    const spec = await body(c, newKeyBody);
    const { id, key, hash } = await mintKey();
    const row = await controlPlane(c.env).createKey(
      { id, tenant, hash, name: spec.name, access: spec.access, agent: spec.agent ?? null, createdBy: caller.actor },
      { tenant, actor: caller.actor, action: "key.create", subject: id, before: null, after: null },
    );
    markAudited(c);
    // The only time the key is shown: only its hash is kept.
    return c.json({ ...row, key }, 201);
  });

  api.get("/tenants/:tenant/keys", async (c) => {
    const tenant = tenantOf(c);
    requireTenantAdmin(c, tenant);
    return c.json({ keys: await controlPlane(c.env).keys(tenant) });
  });

  api.delete("/tenants/:tenant/keys/:id", async (c) => {
    const tenant = tenantOf(c);
    const caller = requireTenantAdmin(c, tenant);
    const id = c.req.param("id");
    const row = await controlPlane(c.env).revokeKey(tenant, id, { tenant, actor: caller.actor, action: "key.revoke", subject: id, before: null, after: null });
    if (!row) throw new HttpError(404, `no live key "${id}"`);
    markAudited(c);
    return c.json({ ok: true, key: row });
  });

  api.get("/tenants/:tenant/roles", async (c) => {
    const tenant = tenantOf(c);
    requireTenantAdmin(c, tenant);
    return c.json({ roles: await controlPlane(c.env).roles(tenant) });
  });

  api.put("/tenants/:tenant/roles/:identity", async (c) => {
    const tenant = tenantOf(c);
    const caller = requireTenantAdmin(c, tenant);
    const identity = identityOf(c);
    const { role } = await body(c, roleBody);
    const { before } = await controlPlane(c.env).setRole(tenant, identity, role, caller.actor);
    markAudited(c);
    return c.json({ ok: true, tenant, identity, role, before });
  });

  api.delete("/tenants/:tenant/roles/:identity", async (c) => {
    const tenant = tenantOf(c);
    const caller = requireTenantAdmin(c, tenant);
    const identity = identityOf(c);
    const { before } = await controlPlane(c.env).setRole(tenant, identity, null, caller.actor);
    if (before === null) throw new HttpError(404, `${identity} has no role here`);
    markAudited(c);
    return c.json({ ok: true, tenant, identity, before });
  });

  api.get("/tenants/:tenant/audit", async (c) => {
    const tenant = tenantOf(c);
    requireTenant(c, tenant, { write: false });
    const query = auditQuery.safeParse(c.req.query());
    if (!query.success) throw new HttpError(400, z.prettifyError(query.error));
    return c.json({ tenant, ...(await readAudit(c.env, tenant, query.data)) });
  });
}

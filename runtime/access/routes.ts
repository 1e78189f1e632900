// The access routes of /v1: a tenant's keys, roles, secrets and audit trail;
// the platform's admins are the admins of tenant `*`. Mounted by the Agents API
// (runtime/edge/api.ts) behind accessGate, each described (lib/route-doc.ts).
import type { Hono } from "hono";
import * as z from "zod";
import type { RouteDoc } from "../../lib/route-doc.ts";
import { errors, serve } from "../../lib/serve-route.ts";
import { granted, listTenants, listTenantSecrets, secretsSet, tenantKeys, tenantRoles, tenantStub } from "../control/index.ts";
import { inEnvironment } from "../../lib/config.ts";
import type { Mount } from "../../plugins/index.ts";
import type { ModelPick } from "../models/index.ts";
import { auditQuery, markAudited, readAudit } from "./audit.ts";
import { requirePlatform, requireTenant, requireTenantAdmin } from "./caller.ts";
import { NO_BOUNDS, setTenantBounds, tenantBounds, tenantBoundsSchema } from "./bounds.ts";
import { createTenantKey, deleteSecret, revokeTenantKey, setSecret, setTenantRole } from "./manage.ts";
import { identitySchema, keyAccessSchema, newKeyBody, roleBody, secretBody, secretNameSchema, tenantRoleSchema } from "./schemas.ts";

/** The tenant every platform admin is kept under: its own object (runtime/control/tenant.ts) keeps their roles. */
export const PLATFORM_TENANT = "*";

const tenant = z.string().regex(/^[A-Za-z0-9._-]{1,128}$/, "tenant: letters, digits, . _ - (max 128)").meta({ examples: ["acme"] });
const tenantParams = z.object({ tenant });
/** Roles may also name `*`, the platform's admins (only ADMIN_TOKEN sets them). */
const roleTenantParams = z.object({ tenant: z.string().regex(/^([A-Za-z0-9._-]{1,128}|\*)$/, "tenant: letters, digits, . _ - (max 128), or * for the platform's admins").meta({ examples: ["acme"] }) });
const roleParams = roleTenantParams.extend({ identity: identitySchema.meta({ examples: ["slack:T1:U1"] }) });

const keyRow = z.looseObject({ id: z.string(), tenant: z.string(), name: z.string(), access: keyAccessSchema, agent: z.string().nullable(), lastUsedAt: z.number().nullable(), revokedAt: z.number().nullable() });
const roleRow = z.looseObject({ identity: z.string(), role: z.string() });

const createKey = {
  method: "post",
  path: "/tenants/{tenant}/keys",
  summary: "Create an API key for the tenant: shown once, only its hash is kept (a tenant admin or the platform)",
  params: tenantParams,
  body: newKeyBody.meta({ examples: [{ name: "ci", access: "write" }] }),
  responses: { 201: { description: "The key, with its secret `key` shown this once.", schema: keyRow.extend({ key: z.string() }) }, ...errors(400, 403, 404, 413, 415) },
} satisfies RouteDoc;
const listKeys = {
  method: "get",
  path: "/tenants/{tenant}/keys",
  summary: "The tenant's keys, without their secrets",
  params: tenantParams,
  responses: { 200: { description: "The keys.", schema: z.object({ keys: z.array(keyRow) }) }, ...errors(400, 403, 404) },
} satisfies RouteDoc;
const revokeKey = {
  method: "delete",
  path: "/tenants/{tenant}/keys/{keyId}",
  summary: "Revoke a key: from now on it is refused (401)",
  params: tenantParams.extend({ keyId: z.string().min(1).max(100) }),
  responses: { 200: { description: "Revoked.", schema: z.object({ ok: z.literal(true), key: keyRow }) }, ...errors(400, 403, 404) },
} satisfies RouteDoc;
const listRoles = {
  method: "get",
  path: "/tenants/{tenant}/roles",
  summary: "Who has a role in the tenant (`*`: the platform's admins)",
  params: roleTenantParams,
  responses: { 200: { description: "The roles.", schema: z.object({ roles: z.array(roleRow) }) }, ...errors(400, 403, 404) },
} satisfies RouteDoc;
const setRole = {
  method: "put",
  path: "/tenants/{tenant}/roles/{identity}",
  summary: "Give a person a role in the tenant: admin or member",
  params: roleParams,
  body: roleBody.meta({ examples: [{ role: "member" }] }),
  responses: { 200: { description: "Set.", schema: z.looseObject({ ok: z.literal(true), role: tenantRoleSchema, before: z.string().nullable() }) }, ...errors(400, 403, 404, 413, 415) },
} satisfies RouteDoc;
const removeRole = {
  method: "delete",
  path: "/tenants/{tenant}/roles/{identity}",
  summary: "Take a person's role in the tenant away",
  params: roleParams,
  responses: { 200: { description: "Removed.", schema: z.looseObject({ ok: z.literal(true), before: z.string().nullable() }) }, ...errors(400, 403, 404) },
} satisfies RouteDoc;
const audit = {
  method: "get",
  path: "/tenants/{tenant}/audit",
  summary: "The tenant's audit trail, newest first: who changed what, when, before and after (never editable)",
  params: tenantParams,
  query: auditQuery,
  responses: { 200: { description: "A page of the trail; `next` is the `before` of the next page.", schema: z.looseObject({ entries: z.array(z.looseObject({ actor: z.string(), action: z.string() })), next: z.number().nullable() }) }, ...errors(400, 404) },
} satisfies RouteDoc;

const readBounds = {
  method: "get",
  path: "/tenants/{tenant}/bounds",
  summary: "The platform's bounds for the tenant's admins: the highest daily spend limit they may set, the models they may choose (null: no bound)",
  params: tenantParams,
  responses: { 200: { description: "The bounds.", schema: tenantBoundsSchema.extend({ tenant: z.string() }) }, ...errors(400, 404) },
} satisfies RouteDoc;
const setBounds = {
  method: "put",
  path: "/tenants/{tenant}/bounds",
  summary: "Set the tenant's bounds (the platform only): a tenant admin or key setting a limit above `maxDailyUsd`, or a model not in `models`, is refused (403)",
  params: tenantParams,
  body: tenantBoundsSchema.meta({ examples: [{ maxDailyUsd: 10, models: ["openai/gpt-4.1-mini", "local"] }] }),
  responses: { 200: { description: "Set.", schema: tenantBoundsSchema.extend({ ok: z.literal(true), tenant: z.string() }) }, ...errors(400, 403, 404, 413, 415) },
} satisfies RouteDoc;
const removeBounds = {
  method: "delete",
  path: "/tenants/{tenant}/bounds",
  summary: "Remove the tenant's bounds (the platform only): no ceiling, every model",
  params: tenantParams,
  responses: { 200: { description: "Removed.", schema: z.looseObject({ ok: z.literal(true), tenant: z.string() }) }, ...errors(400, 403, 404) },
} satisfies RouteDoc;

const secretParams = tenantParams.extend({ name: secretNameSchema.meta({ examples: ["GITHUB_TOKEN"] }) });
const secretListing = z.object({ name: z.string(), createdAt: z.string(), updatedAt: z.string(), updatedBy: z.string() });
const setSecretDoc = {
  method: "put",
  path: "/tenants/{tenant}/secrets/{name}",
  summary: "Set (or rotate) one of the tenant's secrets by value: write-only, sealed, never shown again; its mounts (`secret_ref`) and model choices (`secret`) name it",
  params: secretParams,
  body: secretBody.meta({ examples: [{ value: "ghp_…" }] }),
  responses: { 200: { description: "Set: its name and dates, never its value.", schema: z.object({ ok: z.literal(true), secret: secretListing }) }, ...errors(400, 403, 404, 413, 415, 503) },
} satisfies RouteDoc;
const listSecretsDoc = {
  method: "get",
  path: "/tenants/{tenant}/secrets",
  summary: "The tenant's secrets by name and date (never a value)",
  params: tenantParams,
  responses: { 200: { description: "The secrets.", schema: z.object({ secrets: z.array(secretListing) }) }, ...errors(400, 403, 404) },
} satisfies RouteDoc;
const deleteSecretDoc = {
  method: "delete",
  path: "/tenants/{tenant}/secrets/{name}",
  summary: "Delete one of the tenant's secrets: a mount or model choice naming it is refused at its next use",
  params: secretParams,
  responses: { 200: { description: "Deleted.", schema: z.object({ ok: z.literal(true) }) }, ...errors(400, 403, 404) },
} satisfies RouteDoc;
const secretRefsDoc = {
  method: "get",
  path: "/secret-refs",
  summary: "Mounts and model choices a tenant set that name a Worker secret neither its own nor granted to it: each is refused at its next use (the platform only)",
  responses: {
    200: {
      description: "The references, with the fix: the tenant sets the secret itself, or the platform grants it (SECRET_GRANTS) or sets the setting.",
      schema: z.object({ refs: z.array(z.object({ tenant: z.string(), agent: z.string().nullable(), setting: z.enum(["mounts", "model"]), alias: z.string().nullable(), secret: z.string() })) }),
    },
    ...errors(403),
  },
} satisfies RouteDoc;

export const accessRouteDocs: RouteDoc[] = [createKey, listKeys, revokeKey, listRoles, setRole, removeRole, setSecretDoc, listSecretsDoc, deleteSecretDoc, secretRefsDoc, audit, readBounds, setBounds, removeBounds];

const iso = (ms: number) => new Date(ms).toISOString();
const secretView = (s: { name: string; createdAt: number; updatedAt: number; updatedBy: string }) => ({ ...s, createdAt: iso(s.createdAt), updatedAt: iso(s.updatedAt) });

type SecretRefRow = z.infer<typeof secretRefsDoc.responses[200]["schema"]>["refs"][number];

/** Every tenant-set mount and model choice naming a Worker secret the tenant may not use (and has not set as its own), asked of each listed tenant's object (a tenant with no agent has none to run them). */
async function refusedRefs(env: Env): Promise<SecretRefRow[]> {
  const tenants = (await listTenants(env)).map((t) => t.tenant);
  const stored = await Promise.all(tenants.map(async (tenant) => (await tenantStub(env, tenant).storedSettings(tenant, ["mounts", "models"])).map((row) => ({ tenant, ...row }))));
  const candidates = stored.flat().flatMap(({ tenant, agent, kind, value }): SecretRefRow[] => {
    if (kind === "mounts") return (JSON.parse(value) as Mount[]).filter((m) => m.secret_ref && m.set_by !== "platform").map((m) => ({ tenant, agent, setting: "mounts", alias: m.alias, secret: m.secret_ref! }));
    const pick = JSON.parse(value) as ModelPick;
    return pick.secret && pick.set_by !== "platform" ? [{ tenant, agent, setting: "model", alias: null, secret: pick.secret }] : [];
  }).filter((r) => inEnvironment(env, r.secret) && !granted(env, r.tenant, r.secret));
  const withRefs = [...new Set(candidates.map((r) => r.tenant))];
  const own = new Map(await Promise.all(withRefs.map(async (t) => [t, await secretsSet(env, t, candidates.filter((r) => r.tenant === t).map((r) => r.secret))] as const)));
  return candidates.filter((r) => !own.get(r.tenant)!.has(r.secret));
}

/** `*` names the platform, whose admins only ADMIN_TOKEN names; any other tenant, its admins or the platform. */
function roleAdmin(c: Parameters<typeof requireTenantAdmin>[0], tenant: string) {
  return tenant === PLATFORM_TENANT ? requirePlatform(c) : requireTenantAdmin(c, tenant);
}

export function accessRoutes(api: Hono<{ Bindings: Env }>): void {
  serve(api, createKey, async (c, { params: { tenant }, body: spec }) => {
    const caller = requireTenantAdmin(c, tenant);
    const created = await createTenantKey(c.env, tenant, spec, caller.actor);
    markAudited(c);
    // The only time the key is shown: only its hash is kept.
    return c.json(created, 201);
  });

  serve(api, listKeys, async (c, { params: { tenant } }) => {
    requireTenantAdmin(c, tenant);
    return c.json({ keys: await tenantKeys(c.env, tenant) });
  });

  serve(api, revokeKey, async (c, { params: { tenant, keyId } }) => {
    const caller = requireTenantAdmin(c, tenant);
    const row = await revokeTenantKey(c.env, tenant, keyId, caller.actor);
    markAudited(c);
    return c.json({ ok: true as const, key: row });
  });

  serve(api, listRoles, async (c, { params: { tenant } }) => {
    roleAdmin(c, tenant);
    return c.json({ roles: await tenantRoles(c.env, tenant) });
  });

  serve(api, setRole, async (c, { params: { tenant, identity }, body: { role } }) => {
    const caller = roleAdmin(c, tenant);
    const { before } = await setTenantRole(c.env, tenant, identity, role, caller.actor);
    markAudited(c);
    return c.json({ ok: true, tenant, identity, role, before });
  });

  serve(api, removeRole, async (c, { params: { tenant, identity } }) => {
    const caller = roleAdmin(c, tenant);
    const { before } = await setTenantRole(c.env, tenant, identity, null, caller.actor);
    markAudited(c);
    return c.json({ ok: true, tenant, identity, before });
  });

  // A tenant's write or admin key (the gate refuses a read-only or one-agent key), or the platform.
  serve(api, setSecretDoc, async (c, { params: { tenant, name }, body }) => {
    const caller = requireTenant(c, tenant, { write: true });
    markAudited(c);
    return c.json({ ok: true as const, secret: secretView(await setSecret(c.env, tenant, name, body.value, caller.actor)) });
  });

  serve(api, listSecretsDoc, async (c, { params: { tenant } }) => c.json({ secrets: (await listTenantSecrets(c.env, tenant)).map(secretView) }));

  serve(api, deleteSecretDoc, async (c, { params: { tenant, name } }) => {
    const caller = requireTenant(c, tenant, { write: true });
    markAudited(c);
    await deleteSecret(c.env, tenant, name, caller.actor);
    return c.json({ ok: true as const });
  });

  serve(api, secretRefsDoc, async (c) => {
    requirePlatform(c);
    return c.json({ refs: await refusedRefs(c.env) });
  });

  serve(api, readBounds, async (c, { params: { tenant } }) => c.json({ tenant, ...(await tenantBounds(c.env, tenant)) }));

  serve(api, setBounds, async (c, { params: { tenant }, body }) => {
    const caller = requirePlatform(c);
    await setTenantBounds(c.env, tenant, body, caller.actor);
    markAudited(c);
    return c.json({ ok: true as const, tenant, ...body });
  });

  serve(api, removeBounds, async (c, { params: { tenant } }) => {
    const caller = requirePlatform(c);
    await setTenantBounds(c.env, tenant, null, caller.actor);
    markAudited(c);
    return c.json({ ok: true as const, tenant, ...NO_BOUNDS });
  });

  serve(api, audit, async (c, { params: { tenant }, query }) => {
    requireTenant(c, tenant, { write: false });
    return c.json({ tenant, ...(await readAudit(c.env, tenant, query)) });
  });
}

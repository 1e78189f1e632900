// The access room: who may do what. The /v1 door (accessGate: bearer → caller,
// the path's tenant checked once for every route), scoped API keys, roles per
// tenant, and the audit trail, all kept in the control plane.
export { accessGate, callerOf, KEY_ROUTES_WITHOUT_TENANT, PLATFORM_ACTOR, requirePlatform, requireTenant, requireTenantAdmin, resolveCaller, withinBounds } from "./caller.ts";
export { checkBounds, setTenantBounds, tenantBounds, tenantBoundsSchema, type BoundedChange, type TenantBounds } from "./bounds.ts";
export { createTenantKey, revokeTenantKey, setTenantRole } from "./manage.ts";
export type { AccessEnv, Caller } from "./types.ts";
export { adminToken } from "./config.ts";
export { auditQuery, markAudited, recordChange, readAudit } from "./audit.ts";
export { accessRouteDocs, accessRoutes, PLATFORM_TENANT } from "./routes.ts";
export { identitySchema, IDENTITY, keyAccessSchema, newKeyBody, roleBody, tenantRoleSchema, type TenantRole } from "./schemas.ts";

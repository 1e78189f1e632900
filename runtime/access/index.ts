// The access room: who may do what. The /v1 door (accessGate: bearer → caller,
// the path's tenant checked once for every route), scoped API keys, roles per
// tenant, the tenant's secrets (set by value, kept in its own object), the
// audit trail, and failed credentials slowed down.
export { accessGate, callerOf, KEY_ROUTES_WITHOUT_TENANT, PLATFORM_ACTOR, requirePlatform, requireTenant, requireTenantAdmin, resolveCaller, withinBounds } from "./caller.ts";
export { checkBounds, setTenantBounds, tenantBounds, tenantBoundsSchema, type BoundedChange, type TenantBounds } from "./bounds.ts";
export { createTenantKey, deleteSecret, revokeTenantKey, setSecret, setTenantRole } from "./manage.ts";
export type { AccessEnv, Caller } from "./types.ts";
export { clientOf, credentialFailed, credentialHeld, refuseWhileThrottled } from "./throttle.ts";
export { adminToken } from "./config.ts";
export { hashKey, keyTenant } from "./keys.ts";
export { auditQuery, markAudited, recordChange, readAudit } from "./audit.ts";
export { accessRouteDocs, accessRoutes, PLATFORM_TENANT } from "./routes.ts";
export { identitySchema, IDENTITY, keyAccessSchema, newKeyBody, roleBody, secretBody, secretNameSchema, tenantRoleSchema, type TenantRole } from "./schemas.ts";

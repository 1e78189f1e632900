// The control room: the control plane (one object for what is not one agent's:
// the directory, per-tenant settings, roles and the trail, the people
// directory), the settings each agent keeps a copy of, and each tenant's own
// object (its secrets, sealed, its API keys, and the records a bridge keeps
// for it and reads on a turn's way: installations, webhook secrets and callbacks).
export { mountList } from "./config.ts";
export { deleteTenantRecord, keepTenantKey, putTenantRecord, revokeTenantKeyRow, Tenant, tenantKeys, tenantRecord, tenantStub, useTenantKey } from "./tenant.ts";
export type { TenantKey } from "./tenant-keys.ts";
export type { SecretListing } from "./tenant.ts";
export { deleteTenantSecret, granted, listTenantSecrets, platformSecret, refProblem, resolveSecret, secretsSet, setTenantSecret, type SecretRef } from "./tenant-secrets.ts";
export { ControlPlane, controlPlane, listAgents, listTenants, peopleNames, recordAgent, rememberPerson, type SettingAudit } from "./control-plane.ts";
export type { PersonName } from "./people.ts";
export type { AgentListing, AgentRecord, DirectoryEntry, TenantListing } from "./directory.ts";
export { modelFrom, mountsFrom, NO_SETTINGS, parseSettings, secondMessageFrom, type SettingKind, SettingsCopy, type SettingsText } from "./settings.ts";
export type { AuditEntry, AuditRow, KeyAccess, KeyRow, RoleRow } from "./access-tables.ts";

// The control room: the control plane (one object for the platform's own
// facts: the directory of tenants' and agents' names), the settings each agent
// keeps a copy of, each tenant's own object (its secrets, sealed, its API
// keys, roles, audit trail, bounds, settings and agents, its people's names,
// and the records a bridge keeps for it and reads on a turn's way:
// installations, webhook secrets and callbacks), and each person's index of
// the tenants where they were given a role.
export { mountList } from "./config.ts";
export {
  agentSettings,
  appendTenantAudit,
  deleteTenantRecord,
  keepTenantKey,
  keepTenantRole,
  peopleNames,
  putAuditedTenantRecord,
  putTenantRecord,
  recordAgent,
  registerAgent,
  rememberPerson,
  revokeTenantKeyRow,
  rolesHeldBy,
  Tenant,
  tenantAudit,
  tenantKeys,
  tenantRecord,
  tenantRoles,
  tenantStub,
  useTenantKey,
} from "./tenant.ts";
export { PersonRoles } from "./person-roles.ts";
export type { TenantKey } from "./tenant-keys.ts";
export type { SecretListing, SettingAudit } from "./tenant.ts";
export { deleteTenantSecret, granted, listTenantSecrets, platformSecret, refProblem, resolveSecret, secretsSet, setTenantSecret, type SecretRef } from "./tenant-secrets.ts";
export { ControlPlane, controlPlane, listAgents, listTenants } from "./control-plane.ts";
export type { AuditEntry, AuditRow, PersonName, RoleRow } from "./tenant-access.ts";
export type { AgentListing, DirectoryEntry, TenantListing } from "./directory.ts";
export type { TenantAgent } from "./tenant-settings.ts";
export { modelFrom, mountsFrom, NO_SETTINGS, parseSettings, secondMessageFrom, type SettingKind, SettingsCopy, type SettingsText } from "./settings.ts";
export type { KeyAccess, KeyRow } from "./access-tables.ts";

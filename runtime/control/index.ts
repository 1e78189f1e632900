// The control room: the control plane (one object for the platform's own
// facts: the directory, roles and the trail, the people directory), the
// settings each agent keeps a copy of, and each tenant's own object (its
// secrets, sealed, its API keys, its settings and agents, and the records a
// bridge keeps for it and reads on a turn's way: installations, webhook
// secrets and callbacks).
export { mountList } from "./config.ts";
export { agentSettings, deleteTenantRecord, keepTenantKey, recordAgent, registerAgent, putTenantRecord, revokeTenantKeyRow, Tenant, tenantKeys, tenantRecord, tenantStub, useTenantKey } from "./tenant.ts";
export type { TenantKey } from "./tenant-keys.ts";
export type { SecretListing } from "./tenant.ts";
export { deleteTenantSecret, granted, listTenantSecrets, platformSecret, refProblem, resolveSecret, secretsSet, setTenantSecret, type SecretRef } from "./tenant-secrets.ts";
export { ControlPlane, controlPlane, listAgents, listTenants, peopleNames, rememberPerson } from "./control-plane.ts";
export type { PersonName } from "./people.ts";
export type { AgentListing, DirectoryEntry, TenantListing } from "./directory.ts";
export type { TenantAgent } from "./tenant-settings.ts";
export { modelFrom, mountsFrom, NO_SETTINGS, parseSettings, secondMessageFrom, type SettingKind, SettingsCopy, type SettingsText } from "./settings.ts";
export type { AuditEntry, AuditRow, KeyAccess, KeyRow, RoleRow } from "./access-tables.ts";

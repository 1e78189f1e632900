// A tenant's secrets, and which store a secret's name refers to. A tenant sets
// a secret by value (write-only); the Worker seals it with a key derived from
// TENANT_SECRETS_KEY and bound to the tenant and the name, and keeps it in the
// tenant's own object. A courier opens it at the moment a call uses it. The
// Worker's environment is the platform's: a name refers to it only where the
// platform set the mount or model choice, or granted the name to the tenant
// (SECRET_GRANTS), and never to one of the runtime's own (invariant 5).
import { environmentSecret, isRuntimeSecret } from "../../lib/config.ts";
import { open, seal } from "../../lib/sealed.ts";
import type { SecretLookup } from "../../plugins/index.ts";
import { secretGrants, tenantSecretsKey } from "./config.ts";
import { tenantStub, type SecretListing } from "./tenant.ts";

/** A secret named by a setting: its name, who set the setting, and what the setting is (for the sentences). */
export interface SecretRef {
  name: string;
  setBy?: "platform";
  /** e.g. `mount "vault"`, `the model choice`. */
  what: string;
}

/** What a tenant's secret is sealed for (lib/sealed.ts): the HKDF purpose. */
const PURPOSE = "antiproton/tenant-secret";
/** Authenticated data: a value copied to another tenant or name does not open. */
const boundTo = (tenant: string, name: string) => `${tenant}\n${name}`;

export async function setTenantSecret(env: Env, tenant: string, name: string, value: string, actor: string): Promise<SecretListing> {
  return tenantStub(env, tenant).putSecret(tenant, name, await seal(tenantSecretsKey(env), PURPOSE, boundTo(tenant, name), value), actor);
}

export function deleteTenantSecret(env: Env, tenant: string, name: string): Promise<boolean> {
  return tenantStub(env, tenant).deleteSecret(tenant, name);
}

export function listTenantSecrets(env: Env, tenant: string): Promise<SecretListing[]> {
  return tenantStub(env, tenant).secrets(tenant);
}

/** Whether the platform granted the tenant this Worker secret. */
export function granted(env: Env, tenant: string, name: string): boolean {
  return !isRuntimeSecret(name) && (secretGrants(env)[tenant]?.includes(name) ?? false);
}

const runtimeOwn = (ref: SecretRef) => `${ref.what} names ${ref.name}, one of the runtime's own secrets, which no mount or model choice may use`;

/**
 * Why a setting may not name this secret, or null: checked when the setting
 * is written (`has`: whether the tenant has set a secret by that name).
 */
export function refProblem(env: Env, tenant: string, ref: SecretRef, has: boolean): string | null {
  if (ref.setBy === "platform") return isRuntimeSecret(ref.name) ? runtimeOwn(ref) : null;
  if (has || granted(env, tenant, ref.name)) return null;
  return notSet(tenant, ref);
}

const notSet = (tenant: string, ref: SecretRef) =>
  `${ref.what} names the secret ${ref.name}, which tenant ${tenant} has not set: set it with PUT /v1/tenants/${tenant}/secrets/${ref.name} (a Worker secret is named only by the platform, or where it grants one)`;

/** The Worker secret a platform's setting names (read at once, with no call: the agent's object redacts with it too). */
export function platformSecret(env: Env, ref: SecretRef): SecretLookup {
  if (ref.setBy !== "platform") return { missing: `${ref.what} names a secret of the tenant's own, opened only where a call is made` };
  if (isRuntimeSecret(ref.name)) return { missing: runtimeOwn(ref) };
  const value = environmentSecret(env, ref.name);
  return value ? { value } : { missing: `the Worker secret ${ref.name} of ${ref.what} is not set` };
}

/** The secret a setting names, as a call uses it: from the tenant's own store, or the environment where the platform allows. */
export async function resolveSecret(env: Env, tenant: string, ref: SecretRef): Promise<SecretLookup> {
  if (ref.setBy === "platform") return platformSecret(env, ref);
  const stored = (await tenantStub(env, tenant).sealedSecrets(tenant, [ref.name]))[ref.name];
  if (stored) return { value: await open(tenantSecretsKey(env), PURPOSE, boundTo(tenant, ref.name), stored) };
  if (granted(env, tenant, ref.name)) {
    const value = environmentSecret(env, ref.name);
    return value ? { value } : { missing: `the Worker secret ${ref.name} granted to tenant ${tenant} is not set` };
  }
  return { missing: notSet(tenant, ref) };
}

/** Which of `names` the tenant has set (one call to its object). */
export async function secretsSet(env: Env, tenant: string, names: string[]): Promise<Set<string>> {
  if (names.length === 0) return new Set();
  return new Set(Object.keys(await tenantStub(env, tenant).sealedSecrets(tenant, names)));
}

// The control room's configuration: the deployment's mounts (MOUNTS; tenants
// and agents add their own through the Agents API, runtime/control/settings.ts),
// the key tenants' secrets are sealed with, and the Worker secrets the
// platform grants to tenants (SECRET_GRANTS).
import * as z from "zod";
import { isRuntimeSecret, parseJsonVar, requiredSecret } from "../../lib/config.ts";
import { mountSchema, SECRET_NAME, type Mount } from "../../plugins/index.ts";

export const mountList = z.array(mountSchema);

/** MOUNTS: a JSON array of mounts, every agent's; the platform's, so each may name a Worker secret. */
export function configuredMounts(env: Env): Mount[] {
  return parseJsonVar("MOUNTS", env.MOUNTS, mountList, "[]");
}

/** The key every tenant's secrets are sealed under (derived per use); no tenant can read it. */
export function tenantSecretsKey(env: Env): string {
  return requiredSecret(env, "TENANT_SECRETS_KEY", "it seals the secrets tenants set (PUT /v1/tenants/{tenant}/secrets/{name})");
}

const grantsSchema = z.record(
  z.string().min(1),
  z.array(z.string().regex(SECRET_NAME, "a granted name is a Worker secret's (UPPER_SNAKE_CASE)").refine((name) => !isRuntimeSecret(name), "the runtime's own secrets cannot be granted")),
);

/** SECRET_GRANTS: tenant → the Worker secrets its own mounts and model choices may name. */
export function secretGrants(env: Env): Record<string, string[]> {
  return parseJsonVar("SECRET_GRANTS", env.SECRET_GRANTS, grantsSchema, "{}");
}

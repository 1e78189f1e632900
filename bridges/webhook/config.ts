// The webhook bridge's settings: every variable and secret it reads from the
// Worker env, parsed here.
import { booleanVar, requiredSecret, secretNamed } from "../../lib/config.ts";

export const DEFAULT_AGENT = "assistant";

/** The platform's shared secret, which signs events both ways (HMAC-SHA256) for a tenant without its own; undefined when unset or switched off. */
export function sharedWebhookSecret(env: Env): string | undefined {
  return booleanVar("WEBHOOK_SHARED_SECRET_ENABLED", env.WEBHOOK_SHARED_SECRET_ENABLED, true) ? secretNamed(env, "WEBHOOK_SECRET") : undefined;
}

/** The key every tenant's own webhook secret is derived from (WEBHOOK_TENANT_SECRETS_KEY). */
export function tenantSecretsKey(env: Env): string {
  return requiredSecret(env, "WEBHOOK_TENANT_SECRETS_KEY", "each tenant's own webhook secret is derived from it");
}

/** The agent an event goes to when it names none (WEBHOOK_AGENT). */
export function defaultAgent(env: Env): string {
  return env.WEBHOOK_AGENT?.trim() || DEFAULT_AGENT;
}

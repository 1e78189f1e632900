// The Slack bridge's settings, read from the Worker env. Secrets are read by
// name (they are not part of the generated Env type).
import { baseUrlFrom, ConfigError, secretNamed } from "../../lib/config.ts";
import { parseRoute, type Route } from "../../runtime/index.ts";

const DEFAULT_API_BASE_URL = "https://slack.com/api";
const DEFAULT_AGENT = "assistant";

/** The Web API base; tests point it at the loopback fake. Bot tokens go there, so never over plain http off this machine. */
export function apiBaseUrl(env: Env): string {
  return baseUrlFrom("SLACK_API_BASE_URL", env.SLACK_API_BASE_URL, DEFAULT_API_BASE_URL);
}

/** The one agent this Slack app serves, in whichever workspace it is installed. */
export function routeFor(env: Env, tenant: string): Route {
  return parseRoute(tenant, env.SLACK_AGENT || DEFAULT_AGENT);
}

export function requiredSecret(env: Env, name: string, why: string): string {
  const value = secretNamed(env, name);
  if (!value) throw new ConfigError(`${name} is not set: ${why}`);
  return value;
}

export function signingSecret(env: Env): string {
  return requiredSecret(env, "SLACK_SIGNING_SECRET", "it verifies requests from Slack (docs/slack.md)");
}

/** Multi-workspace OAuth is on when the app's client id is configured. */
export function oauthEnabled(env: Env): boolean {
  return (env.SLACK_CLIENT_ID ?? "") !== "";
}

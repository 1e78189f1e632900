// Configuration helpers every folder may use: variables are parsed, never
// trusted, and a bad value is reported by the variable's name.
import * as z from "zod";
import { isHttpsOrLoopback } from "./http.ts";

export class ConfigError extends Error {
  override name = "ConfigError";
}

/**
 * Parsed values by variable and text: a variable is read on every pass and
 * call, and parsing it each time (MODEL_PROVIDERS, MOUNTS) cost a turn more
 * CPU than the rest of its configuration work. A value is frozen: shared, it
 * must not change.
 */
const parsedVars = new Map<string, unknown>();

/** A JSON variable parsed with `schema`; empty or unset reads as `fallback`. */
export function parseJsonVar<T>(name: string, raw: string | undefined, schema: z.ZodType<T>, fallback: string): T {
  const text = raw === undefined || raw.trim() === "" ? fallback : raw;
  const key = `${name}\n${text}`;
  if (parsedVars.has(key)) return parsedVars.get(key) as T;
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new ConfigError(`${name} is not valid JSON`);
  }
  const parsed = schema.safeParse(value);
  if (!parsed.success) throw new ConfigError(`${name} is invalid: ${z.prettifyError(parsed.error)}`);
  parsedVars.set(key, deepFreeze(parsed.data));
  return parsed.data;
}

function deepFreeze<T>(value: T): T {
  if (value !== null && typeof value === "object" && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const inner of Object.values(value)) deepFreeze(inner);
  }
  return value;
}

/** A boolean variable: `true` or `false`; empty or unset reads as `fallback`. */
export function booleanVar(name: string, raw: string | undefined, fallback: boolean): boolean {
  return parseJsonVar(name, raw, z.boolean(), String(fallback));
}

/** Whether calls into objects are counted (COUNT_OBJECT_CALLS, default false: a measuring run's switch; lib/object-calls.ts). */
export function countingObjectCalls(env: Pick<Env, "COUNT_OBJECT_CALLS">): boolean {
  return booleanVar("COUNT_OBJECT_CALLS", env.COUNT_OBJECT_CALLS, false);
}

/**
 * The secrets the runtime reads for itself. No mount and no model choice may
 * name one, whoever sets it (invariant 5): `secretNamed` takes only these, so
 * the compiler keeps the list whole.
 */
export const RUNTIME_SECRETS = [
  "ADMIN_TOKEN",
  "TENANT_SECRETS_KEY",
  "MACHINE_HOST_TOKEN",
  "WEBHOOK_SECRET",
  "WEBHOOK_TENANT_SECRETS_KEY",
  "SLACK_SIGNING_SECRET",
  "SLACK_CLIENT_SECRET",
  "SLACK_TOKEN_ENCRYPTION_KEY",
  "SLACK_BOT_TOKEN",
  "SLACK_SOCKET_FORWARD_SECRET",
  "DISCORD_BOT_TOKEN",
  "DISCORD_PUBLIC_KEY",
  "DISCORD_GATEWAY_SECRET",
  "DISCORD_APPLICATION_ID",
  "DISCORD_CLIENT_SECRET",
  "TELEGRAM_BOTS",
  "TELEGRAM_WEBHOOK_SECRET",
  "GCHAT_SERVICE_ACCOUNT",
  "TEAMS_APP_PASSWORD",
] as const;
export type RuntimeSecret = (typeof RUNTIME_SECRETS)[number];
const runtimeSecrets: ReadonlySet<string> = new Set(RUNTIME_SECRETS);

export const isRuntimeSecret = (name: string): boolean => runtimeSecrets.has(name);

function bound(env: Env, name: string): string | undefined {
  const value = (env as unknown as Record<string, unknown>)[name];
  return typeof value === "string" && value !== "" ? value : undefined;
}

/** Whether the Worker's environment holds a text by that name: a secret or a plain variable alike. */
export const inEnvironment = (env: Env, name: string): boolean => bound(env, name) !== undefined;

/** One of the runtime's own secrets; secrets are not part of the generated Env type. */
export function secretNamed(env: Env, name: RuntimeSecret): string | undefined {
  return bound(env, name);
}

/**
 * A Worker secret named by configuration (a provider's key, a mount the
 * platform set, a grant): never one of the runtime's own.
 */
export function environmentSecret(env: Env, name: string): string | undefined {
  return isRuntimeSecret(name) ? undefined : bound(env, name);
}

/** A secret the feature cannot work without: a ConfigError that says why, when it is unset. */
export function requiredSecret(env: Env, name: RuntimeSecret, why: string): string {
  const value = secretNamed(env, name);
  if (!value) throw new ConfigError(`${name} is not set: ${why}`);
  return value;
}

/**
 * A URL we will send to (a provider, a webhook callback): https, or http on
 * loopback. Checked in one refinement, so text that is not a URL at all is
 * reported as such instead of reaching `new URL` and throwing.
 */
export function httpsOrLoopbackUrl(field: string) {
  return z
    .string()
    .refine((u) => URL.canParse(u), `${field} is not a URL`)
    .refine((u) => !URL.canParse(u) || isHttpsOrLoopback(new URL(u)), `${field} must be https (http is allowed only for loopback)`);
}

/** A configured API base URL (Slack's, Discord's): https, or http on loopback; no trailing slash. */
export function baseUrlFrom(name: string, value: string | undefined, fallback: string): string {
  const base = value?.trim() || fallback;
  if (!URL.canParse(base) || !isHttpsOrLoopback(new URL(base))) {
    throw new ConfigError(`${name} must be an https URL (http is allowed only for loopback)`);
  }
  return base.replace(/\/+$/, "");
}

// Every configuration variable is parsed here, never trusted. A bad value is
// reported with the variable's name so the operator knows what to fix.
import { z } from "zod";
import { approversSchema } from "../approvals/index.ts";
import { ConfigError, parseJsonVar, secretNamed } from "../lib/config.ts";
import { HttpError } from "../lib/http.ts";
import { ownValue } from "../lib/own.ts";
import { SEND_LEASE_MS } from "./effects/effects.ts";
import { resolvePick, providerSchema, type ModelChoice, type ModelPick, type ProviderConfig } from "./models/index.ts";

const providerList = z.array(providerSchema).refine((list) => new Set(list.map((p) => p.id)).size === list.length, "provider ids must be unique");

export function modelProviders(env: Env): ProviderConfig[] {
  return parseJsonVar("MODEL_PROVIDERS", env.MODEL_PROVIDERS, providerList, "[]");
}

/** The deployment's model: `HARNESS_MODEL` = `<provider>/<model>`; no provider configured → the built-in local model. */
export function deploymentModel(env: Env): ModelPick {
  const harness = (env.HARNESS_MODEL ?? "").trim();
  if (harness === "" && modelProviders(env).length > 0) throw new ConfigError("MODEL_PROVIDERS is set but HARNESS_MODEL is empty: set it to <provider>/<model>");
  return { model: harness === "" ? "local" : harness };
}

/** A pick resolved against MODEL_PROVIDERS and the model table. */
export function modelChoice(env: Env, pick?: ModelPick): ModelChoice {
  return resolvePick(modelProviders(env), pick ?? deploymentModel(env), pick ? `model "${pick.model}"` : "HARNESS_MODEL");
}

/** How long an effect on the queue may wait for a courier before it is sent again (EFFECT_LEASE_SECONDS). */
export function leaseSeconds(env: Env): number {
  return parseJsonVar("EFFECT_LEASE_SECONDS", env.EFFECT_LEASE_SECONDS, z.number().positive().max(3600), "30");
}

/** Whether replies are streamed to the chat while the model writes them (STREAM_REPLIES, default true). */
export function streamReplies(env: Env): boolean {
  return parseJsonVar("STREAM_REPLIES", env.STREAM_REPLIES, z.boolean(), "true");
}

/**
 * How long a platform call (a chat send) may go unanswered before it is given
 * up and retried (SEND_TIMEOUT_SECONDS). At most half the send effect's lease:
 * the claim and the report must fit in it too, or a second courier would send
 * the same row while the first still waits.
 */
export function sendTimeoutMs(env: Env): number {
  const max = SEND_LEASE_MS / 2 / 1000;
  const seconds = parseJsonVar("SEND_TIMEOUT_SECONDS", env.SEND_TIMEOUT_SECONDS, z.number().positive().max(max, `at most ${max} (half the send lease)`), "10");
  return seconds * 1000;
}

const spendLimit = z.number().nonnegative().nullable();

/** The deployment's default daily spend limit per tenant in USD (DAILY_SPEND_LIMIT_USD); empty: none. */
export function dailySpendLimit(env: Env): number | null {
  return parseJsonVar("DAILY_SPEND_LIMIT_USD", env.DAILY_SPEND_LIMIT_USD, spendLimit, "null");
}

/** The daily limit over all tenants together in USD (PLATFORM_DAILY_SPEND_LIMIT_USD); empty: none. */
export function platformDailySpendLimit(env: Env): number | null {
  return parseJsonVar("PLATFORM_DAILY_SPEND_LIMIT_USD", env.PLATFORM_DAILY_SPEND_LIMIT_USD, spendLimit, "null");
}

export function retryBaseSeconds(env: Env): number {
  const n = Number(env.MODEL_RETRY_BASE_SECONDS ?? "2");
  return Number.isFinite(n) && n >= 0 ? n : 2;
}

export function approversFor(env: Env, tenant: string): string[] {
  return ownValue(parseJsonVar("APPROVERS", env.APPROVERS, approversSchema, "{}"), tenant) ?? [];
}

export function approvalTtlMs(env: Env): number {
  const hours = parseJsonVar("APPROVAL_TTL_HOURS", env.APPROVAL_TTL_HOURS, z.number().positive(), "24");
  return hours * 3_600_000;
}

/** The token guarding /v1 and the console; a deployment without one refuses rather than opens. */
export function adminToken(env: Env): string {
  const token = secretNamed(env, "ADMIN_TOKEN");
  if (!token) throw new HttpError(503, "ADMIN_TOKEN is not configured on this deployment");
  return token;
}

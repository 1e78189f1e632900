// The models' variables, parsed here: MODEL_PROVIDERS, HARNESS_MODEL, the
// retry backoff and the patience with rate limits. A bad value is reported by
// the variable's name.
import * as z from "zod";
import { ConfigError, parseJsonVar } from "../../lib/config.ts";
import { pickProblem, providerSchema, resolvePick } from "./providers.ts";
import type { ModelChoice, ModelPick, ProviderConfig } from "./types.ts";

const providerList = z.array(providerSchema).refine((list) => new Set(list.map((p) => p.id)).size === list.length, "provider ids must be unique");

export function modelProviders(env: Env): ProviderConfig[] {
  return parseJsonVar("MODEL_PROVIDERS", env.MODEL_PROVIDERS, providerList, "[]");
}

/**
 * The deployment's model: `HARNESS_MODEL` = `<provider>/<model>`; no provider
 * configured → the built-in local model. Checked as an admin's choice is: a
 * model neither MODEL_PROVIDERS lists nor pi-ai knows is refused, not guessed.
 */
export function deploymentModel(env: Env): ModelPick {
  const harness = (env.HARNESS_MODEL ?? "").trim();
  const providers = modelProviders(env);
  if (harness === "" && providers.length > 0) throw new ConfigError("MODEL_PROVIDERS is set but HARNESS_MODEL is empty: set it to <provider>/<model>");
  const pick = { model: harness === "" ? "local" : harness };
  const problem = pickProblem(providers, pick);
  if (problem) throw new ConfigError(`HARNESS_MODEL: ${problem}`);
  return pick;
}

/** A pick resolved against MODEL_PROVIDERS and the model table. */
export function modelChoice(env: Env, pick?: ModelPick): ModelChoice {
  return resolvePick(modelProviders(env), pick ?? deploymentModel(env), pick ? `model "${pick.model}"` : "HARNESS_MODEL");
}

/** The first retry of a failed provider call waits this long, doubling (MODEL_RETRY_BASE_SECONDS). */
export function retryBaseSeconds(env: Env): number {
  return parseJsonVar("MODEL_RETRY_BASE_SECONDS", env.MODEL_RETRY_BASE_SECONDS, z.number().nonnegative().max(3600), "2");
}

/** How long a job may wait out its provider's rate limits before its turn fails (MODEL_RATE_LIMIT_PATIENCE_SECONDS). */
export function rateLimitPatienceSeconds(env: Env): number {
  return parseJsonVar("MODEL_RATE_LIMIT_PATIENCE_SECONDS", env.MODEL_RATE_LIMIT_PATIENCE_SECONDS, z.number().nonnegative().max(86_400), "600");
}

// The models room: provider configuration, the model table, the one provider
// call (through its key's gate), and the object's model jobs.
export { callModel, type CallOptions, type ProviderCall } from "./call.ts";
export { deploymentModel, modelChoice, modelProviders, rateLimitPatienceSeconds, retryBaseSeconds } from "./config.ts";
export { ProviderGate } from "./gate.ts";
export { callProvider, type GatedCall } from "./gated-call.ts";
export { type JobPurpose, type JobRow, type JobUsage, ModelJobs, type RecentUsage, type Settled } from "./jobs.ts";
export { localModel } from "./local-model.ts";
export { modelPickSchema, pickProblem, providerSchema, resolvePick } from "./providers.ts";
export { type ModelRequest, type ModelWork, streamKey } from "./request.ts";
export { DEFAULT_MODEL_SETTINGS, modelSettings } from "./table.ts";
export type { ModelApi, ModelChoice, ModelPick, ModelSettings, ProviderConfig } from "./types.ts";
export { MODEL_JOBS_RATE_LIMITS, MODEL_JOBS_TABLE } from "./schema.ts";

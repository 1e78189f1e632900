// Model providers: their configuration, the model table, the one provider call, and its usage.
export { callModel, type CallOptions, type ProviderCall } from "./call.ts";
export { modelPickSchema, pickProblem, providerSchema, resolvePick } from "./providers.ts";
export { DEFAULT_MODEL_SETTINGS, modelSettings } from "./table.ts";
export type { ModelApi, ModelChoice, ModelPick, ModelSettings, ProviderConfig } from "./types.ts";
export { usageRow, type UsageRow } from "../metering/usage.ts";

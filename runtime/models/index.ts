// Model providers: their configuration, the model table, the one provider call, and its usage.
export { callModel, type CallOptions, type ProviderCall } from "./call.ts";
export { modelPickSchema, pickProblem, providerSchema, resolvePick, type ModelApi, type ModelChoice, type ModelPick, type ProviderConfig } from "./providers.ts";
export { DEFAULT_MODEL_SETTINGS, modelSettings, type ModelSettings } from "./table.ts";
export { usageRow, type UsageRow } from "./usage.ts";

// The model table: what the runtime knows about each model (context window,
// max output, prices, images). pi-ai's registry seeds it where it knows the
// model; an unknown model gets conservative defaults; a provider entry in
// MODEL_PROVIDERS may override any of it, provider-wide or per model.
// The registry is read from registry.json: pi-ai's, reduced to what this table
// reads (scripts/model-registry.mjs); pi-ai's own is not in the Worker's bundle.
import type { Api } from "@mariozechner/pi-ai";
import registry from "./registry.json";
import type { ModelApi, ModelSettings, ProviderConfig, SettingsOverride } from "./types.ts";

/**
 * An unknown model. A window set too large makes an over-long request fail at
 * the provider; one set too small only compacts earlier. No price: it counts nothing.
 */
export const DEFAULT_MODEL_SETTINGS: ModelSettings = {
  contextWindow: 32_000,
  maxTokens: 4096,
  cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 },
  images: false,
  reasoning: false,
};

/** The registry's provider for models of an API, when the provider's own id is not one pi-ai knows. */
const REGISTRY_VENDOR: Record<ModelApi, string> = {
  "openai-completions": "openai",
  "openai-responses": "openai",
  "anthropic-messages": "anthropic",
  "google-generative-ai": "google",
};

/** A registry model: its row of the table, and the API it is called with (its compat flags hold for that API only). */
type RegistryModel = ModelSettings & { api: Api };
/** registry.json's row: its "columns" say the order. */
type Row = [id: string, api: number, contextWindow: number, maxTokens: number, input: number, output: number, cacheRead: number, cacheWrite: number, images: number, reasoning: number, thinkingLevelMap?: ModelSettings["thinkingLevelMap"] | null, compat?: ModelSettings["compat"] | null];
const REGISTRY = registry as unknown as { apis: Api[]; providers: Record<string, Row[]> };
/** Each provider's rows by model id, indexed when first asked. */
const indexed = new Map<string, Map<string, Row>>();

function lookup(provider: string, modelId: string): RegistryModel | undefined {
  if (!Object.hasOwn(REGISTRY.providers, provider)) return undefined;
  let byId = indexed.get(provider);
  if (!byId) indexed.set(provider, (byId = new Map(REGISTRY.providers[provider]!.map((row) => [row[0], row]))));
  const row = byId.get(modelId);
  if (!row) return undefined;
  const [, api, contextWindow, maxTokens, input, output, cacheRead, cacheWrite, images, reasoning, thinkingLevelMap, compat] = row;
  return { api: REGISTRY.apis[api]!, contextWindow, maxTokens, cost: { input, output, cacheRead, cacheWrite }, images: images === 1, reasoning: reasoning === 1, ...(thinkingLevelMap ? { thinkingLevelMap } : {}), ...(compat ? { compat } : {}) };
}

/** pi-ai's entry for a model: under the provider's own id first (e.g. `openrouter`), then the API's vendor. */
function registryModel(provider: ProviderConfig, modelId: string): RegistryModel | undefined {
  return lookup(provider.id, modelId) ?? lookup(REGISTRY_VENDOR[provider.api], modelId);
}

function fromRegistry({ api: knownApi, compat, cost, ...known }: RegistryModel, api: ModelApi): ModelSettings {
  // Compat flags describe one API: they do not carry over to another.
  return { ...known, cost: { ...cost }, ...(compat && knownApi === api ? { compat } : {}) };
}

function applyOverride(settings: ModelSettings, override: SettingsOverride): ModelSettings {
  return {
    ...settings,
    ...(override.contextWindow !== undefined ? { contextWindow: override.contextWindow } : {}),
    ...(override.maxTokens !== undefined ? { maxTokens: override.maxTokens } : {}),
    ...(override.images !== undefined ? { images: override.images } : {}),
    cost: { ...settings.cost, ...override.cost },
  };
}

/** A model the operator listed under its provider, or one pi-ai's registry knows there. */
export function knownModel(provider: ProviderConfig, modelId: string): boolean {
  return Object.hasOwn(provider.models, modelId) || registryModel(provider, modelId) !== undefined;
}

/** The table's row for `modelId` at `provider`: default ← registry ← provider-wide override ← per-model override. */
export function modelSettings(provider: ProviderConfig, modelId: string): ModelSettings {
  const known = registryModel(provider, modelId);
  const seeded = known ? fromRegistry(known, provider.api) : DEFAULT_MODEL_SETTINGS;
  return applyOverride(applyOverride(seeded, provider), provider.models[modelId] ?? {});
}

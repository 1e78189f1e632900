// The model table: what the runtime knows about each model (context window,
// max output, prices, images). pi-ai's registry seeds it where it knows the
// model; an unknown model gets conservative defaults; a provider entry in
// MODEL_PROVIDERS may override any of it, provider-wide or per model.
import type { Api, Model } from "@mariozechner/pi-ai";
// pi-ai exports its registry only from its root entry, which bundles every
// provider (6.1 MiB instead of 2.3). Each provider entry already bundles this
// module, so importing it by path adds nothing to the Worker.
import { getModel } from "../../node_modules/@mariozechner/pi-ai/dist/models.js";
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

const lookup = getModel as (provider: string, modelId: string) => Model<Api> | undefined;

/** pi-ai's entry for a model: under the provider's own id first (e.g. `openrouter`), then the API's vendor. */
function registryModel(provider: ProviderConfig, modelId: string): Model<Api> | undefined {
  return lookup(provider.id, modelId) ?? lookup(REGISTRY_VENDOR[provider.api], modelId);
}

function fromRegistry(known: Model<Api>, api: ModelApi): ModelSettings {
  return {
    contextWindow: known.contextWindow,
    maxTokens: known.maxTokens,
    cost: { ...known.cost },
    images: known.input.includes("image"),
    reasoning: known.reasoning,
    ...(known.thinkingLevelMap ? { thinkingLevelMap: known.thinkingLevelMap } : {}),
    // Compat flags describe one API: they do not carry over to another.
    ...(known.compat && known.api === api ? { compat: known.compat } : {}),
  };
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

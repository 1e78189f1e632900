// The models' shared types, in a file that imports none of the room's others:
// providers (their schema) and the model table both use them.
import type { Api, Model } from "@mariozechner/pi-ai";

/** The wire protocols spoken, each through its own pi-ai entry. */
export const MODEL_APIS = ["openai-completions", "openai-responses", "anthropic-messages", "google-generative-ai"] as const;
export type ModelApi = (typeof MODEL_APIS)[number];

/** Overrides of the model table, provider-wide or for one model (MODEL_PROVIDERS). */
export interface SettingsOverride {
  contextWindow?: number;
  maxTokens?: number;
  /** USD per million tokens. */
  cost?: { input?: number; output?: number; cacheRead?: number; cacheWrite?: number };
  images?: boolean;
}

/** A model provider as MODEL_PROVIDERS describes it (runtime/models/providers.ts parses it). */
export interface ProviderConfig extends SettingsOverride {
  id: string;
  api: ModelApi;
  baseUrl: string;
  /** `secret`: the NAME of the Worker secret holding the key, never the key itself; `header`: one that carries it besides the API's own. */
  auth?: { secret: string; header?: string };
  models: Record<string, SettingsOverride>;
}

/** USD per million tokens. */
export interface ModelCost {
  input: number;
  output: number;
  cacheRead: number;
  cacheWrite: number;
}

/** One row of the model table. Plain JSON. */
export interface ModelSettings {
  contextWindow: number;
  maxTokens: number;
  cost: ModelCost;
  images: boolean;
  /**
   * Registry facts pi-ai needs to call the model correctly (a reasoning model,
   * how pi-ai turns its reasoning off, the API's quirks). Not overridable.
   */
  reasoning: boolean;
  thinkingLevelMap?: Model<Api>["thinkingLevelMap"];
  compat?: Model<Api>["compat"];
}

export type ModelChoice =
  | { kind: "local"; settings: ModelSettings }
  | { kind: "provider"; provider: ProviderConfig; model: string; settings: ModelSettings; /** Paid with the tenant's own key. */ byok?: boolean };

/**
 * `<provider>/<model>` (or `local`) and, for a tenant that brings its own key,
 * the NAME of the secret holding it (runtime/control/tenant-secrets.ts says which store).
 */
export interface ModelPick {
  model: string;
  secret?: string;
  set_by?: "platform";
}

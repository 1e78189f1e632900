// A model provider as MODEL_PROVIDERS describes it, and the model choice
// (`<provider>/<model>`) resolved against those providers and the model table.
import * as z from "zod";
import { ConfigError, httpsOrLoopbackUrl } from "../../lib/config.ts";
import { SECRET_NAME } from "../../plugins/index.ts";
import { DEFAULT_MODEL_SETTINGS, knownModel, modelSettings } from "./table.ts";
import { MODEL_APIS, type ModelChoice, type ModelPick, type ProviderConfig, type SettingsOverride } from "./types.ts";

/** Overrides of the model table, provider-wide or for one model. */
const settingsOverride = z.object({
  contextWindow: z.number().int().positive().optional(),
  maxTokens: z.number().int().positive().optional(),
  /** USD per million tokens. */
  cost: z
    .object({
      input: z.number().nonnegative().optional(),
      output: z.number().nonnegative().optional(),
      cacheRead: z.number().nonnegative().optional(),
      cacheWrite: z.number().nonnegative().optional(),
    })
    .strict()
    .optional(),
  images: z.boolean().optional(),
}) satisfies z.ZodType<SettingsOverride>;

export const providerSchema = z.object({
  id: z.string().regex(/^[A-Za-z0-9._-]+$/, "provider id: letters, digits, . _ -"),
  api: z.enum(MODEL_APIS).default("openai-completions"),
  baseUrl: httpsOrLoopbackUrl("baseUrl"),
  auth: z
    .object({
      /** The NAME of the Worker secret holding the key, never the key itself. */
      secret: z.string().regex(/^[A-Z][A-Z0-9_]*$/, "auth.secret names a Worker secret (UPPER_SNAKE_CASE)"),
      /** A header that carries the key besides the API's own (Authorization, x-api-key, x-goog-api-key). */
      header: z.string().optional(),
    })
    .optional(),
  ...settingsOverride.shape,
  models: z.record(z.string(), settingsOverride.strict()).default({}),
}) satisfies z.ZodType<ProviderConfig>;

/**
 * Which model an agent uses: `<provider>/<model>` (or `local`), and for a
 * tenant that brings its own key, the NAME of the Worker secret holding it.
 * Chosen per deployment (HARNESS_MODEL), tenant or agent; carried in each model
 * job, so the next call runs on a new choice.
 */
export const modelPickSchema = z
  .object({
    model: z.string().min(1).max(200),
    secret: z.string().regex(SECRET_NAME, "secret names a secret (UPPER_SNAKE_CASE, at most 64 characters), never a key").optional(),
    /** Stamped by the runtime when the platform made the choice; a tenant's never carries it. */
    set_by: z.literal("platform").optional(),
  })
  .strict() satisfies z.ZodType<ModelPick>;

/** `<provider>/<model>` (the model id may itself contain slashes); `local` → the built-in offline model. */
export function chooseModel(providers: ProviderConfig[], spec: string, name: string): ModelChoice {
  // The offline model has no real limit; an unknown model's window keeps compaction exercised with it too.
  if (spec === "local") return { kind: "local", settings: DEFAULT_MODEL_SETTINGS };
  const slash = spec.indexOf("/");
  if (slash <= 0 || slash === spec.length - 1) throw new ConfigError(`${name} must be <provider>/<model>`);
  const id = spec.slice(0, slash);
  const provider = providers.find((p) => p.id === id);
  if (!provider) throw new ConfigError(`${name} names provider "${id}", which is not in MODEL_PROVIDERS`);
  const model = spec.slice(slash + 1);
  return { kind: "provider", provider, model, settings: modelSettings(provider, model) };
}

/** A pick resolved: with its own key, the provider is called with the tenant's secret instead of the operator's. */
export function resolvePick(providers: ProviderConfig[], pick: ModelPick, name: string): ModelChoice {
  const choice = chooseModel(providers, pick.model, name);
  if (!pick.secret) return choice;
  if (choice.kind !== "provider") throw new ConfigError(`${name}: the local model takes no key`);
  return { ...choice, provider: { ...choice.provider, auth: { ...choice.provider.auth, secret: pick.secret } }, byok: true };
}

/** Why a pick from the admin API cannot be used (an unknown provider or model), or null. */
export function pickProblem(providers: ProviderConfig[], pick: ModelPick): string | null {
  try {
    const choice = resolvePick(providers, pick, "model");
    if (choice.kind === "provider" && !knownModel(choice.provider, choice.model)) {
      return `model "${choice.model}" is not one provider "${choice.provider.id}" lists in MODEL_PROVIDERS (under "models") nor one pi-ai knows there`;
    }
    return null;
  } catch (err) {
    if (err instanceof ConfigError) return err.message;
    throw err;
  }
}

// The one place a provider is called (from a courier, never from the object):
// a request in, a ProviderCall out, with the key resolved by name and
// redacted from any error that comes back.
import type { Model } from "@mariozechner/pi-ai";
import { streamOpenAICompletions } from "@mariozechner/pi-ai/openai-completions";
import { ConfigError, secretNamed } from "../lib/config.ts";
import { modelChoice, type ProviderConfig } from "./config.ts";
import { localModel } from "./local-model.ts";
import type { ModelRequest, ProviderCall } from "./model-job.ts";

/** A provider's refusal of the request itself: retrying cannot help. */
const REFUSED = new Set([400, 401, 403, 404, 422]);

/** Never throws: a configuration that cannot work is a refusal (retrying cannot help), anything else a retry. */
export async function callModel(env: Env, request: ModelRequest): Promise<ProviderCall> {
  try {
    return await call(env, request);
  } catch (err) {
    if (err instanceof ConfigError) return { kind: "refused", error: `not configured: ${err.message}` };
    return { kind: "retry", error: err instanceof Error ? err.message : String(err) };
  }
}

async function call(env: Env, request: ModelRequest): Promise<ProviderCall> {
  const choice = modelChoice(env);
  if (choice.kind === "local") return { kind: "reply", message: localModel(request) };
  const key = apiKey(env, choice.provider);
  const message = await streamOpenAICompletions(
    providerModel(choice.provider, choice.model),
    { systemPrompt: request.systemPrompt, messages: request.messages, tools: request.tools as never },
    { apiKey: key, maxRetries: 0, timeoutMs: 120_000, headers: authHeaders(choice.provider, key) },
  ).result();
  if (message.stopReason !== "error") return { kind: "reply", message };
  // The error reaches the chat and SQLite: a provider that echoes the key must not leak it.
  const raw = message.errorMessage ?? "the provider returned an error";
  const error = choice.provider.auth ? raw.replaceAll(key, "[redacted]") : raw;
  const status = Number(/^(\d{3})\b/.exec(error)?.[1]);
  if (REFUSED.has(status)) return { kind: "refused", error: `the model provider refused the request (${error})` };
  return { kind: "retry", error };
}

function providerModel(provider: ProviderConfig, model: string): Model<"openai-completions"> {
  return {
    id: model,
    name: model,
    api: "openai-completions",
    provider: provider.id,
    baseUrl: provider.baseUrl,
    reasoning: false,
    input: ["text"],
    cost: provider.cost,
    contextWindow: provider.contextWindow,
    maxTokens: provider.maxTokens,
  };
}

function apiKey(env: Env, provider: ProviderConfig): string {
  if (!provider.auth) return "none";
  const value = secretNamed(env, provider.auth.secret);
  if (!value) throw new ConfigError(`the Worker secret ${provider.auth.secret} named by provider ${provider.id} is not set`);
  return value;
}

/** A provider that wants its key in a header other than Authorization gets it there. */
function authHeaders(provider: ProviderConfig, key: string): Record<string, string> | undefined {
  if (!provider.auth || provider.auth.header.toLowerCase() === "authorization") return undefined;
  return { [provider.auth.header]: key };
}

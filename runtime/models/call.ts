// One model call: the choice's provider, through pi-ai's entry for its API.
// The only place a provider is reached; a courier calls it, never the object.
import type { Api, AssistantMessage, AssistantMessageEventStream, Context, Model, StreamOptions } from "@mariozechner/pi-ai";
import { streamAnthropic } from "@mariozechner/pi-ai/anthropic";
import { streamGoogle } from "@mariozechner/pi-ai/google";
import { streamOpenAICompletions } from "@mariozechner/pi-ai/openai-completions";
import { streamOpenAIResponses } from "@mariozechner/pi-ai/openai-responses";
// pi-ai's own patterns for each provider's "too long" wording, by path: its root entry bundles every provider.
import { isContextOverflow } from "../../node_modules/@mariozechner/pi-ai/dist/utils/overflow.js";
import { ConfigError, environmentSecret } from "../../lib/config.ts";
import type { ModelRequest } from "./request.ts";
import { textOf } from "../store/index.ts";
import { localModel } from "./local-model.ts";
import { errorCode, waitFromHeaders, watchResponses } from "./seen-responses.ts";
import type { ModelApi, ModelChoice, ProviderConfig } from "./types.ts";

export type ProviderCall =
  | { kind: "reply"; message: AssistantMessage }
  /**
   * The provider refused the request itself: retrying it as it is cannot help.
   * `tooLong`: it does not fit the model's context window (a compaction may).
   */
  | { kind: "refused"; error: string; status?: number; tooLong?: boolean; /** The person is told `error` as it is (a spend limit). */ verbatim?: boolean }
  /** Worth another try; `retryAfterSeconds` when the provider said how long to wait. */
  | { kind: "retry"; error: string; status?: number; retryAfterSeconds?: number }
  /**
   * The provider's rate limit on the key: come back at `until` (ms since the
   * epoch), as the provider or the key's gate said (runtime/models/gate.ts). Not an attempt that failed.
   */
  | { kind: "limited"; error: string; until: number };

export interface CallOptions {
  /**
   * Requests sharing a key share a prompt-cache route where the provider has
   * one (OpenAI's `prompt_cache_key`): one agent's calls share a system prompt and tools.
   */
  cacheKey?: string;
  /**
   * Told the text of the reply so far, each time it grows, and when the call
   * began (the reply's timestamp, which names the call): the courier streams it
   * to the chat and to the conversation's Responses streams.
   */
  onText?: (text: string, calledAt: number) => void;
  /** Told once a successful response has begun, before its body is read. */
  onAccepted?: () => Promise<void>;
  /** Told the provider's answer as read, whatever its outcome: what it used is what was paid for. */
  onAnswer?: (message: AssistantMessage) => void;
  /** The key, where the caller opened it (a tenant's own: its courier resolves it); else the operator's Worker secret. */
  key?: string;
}

const REFUSED = new Set([400, 401, 403, 404, 422]);
const REQUEST_TIMEOUT_MS = 120_000;

type Call = (model: Model<Api>, context: Context, options: StreamOptions) => AssistantMessageEventStream;

/** Each API through its own pi-ai entry, so the Worker bundles no other provider's SDK. */
const CALLS: Record<ModelApi, Call> = {
  "openai-completions": (model, context, options) => streamOpenAICompletions(model as Model<"openai-completions">, context, options),
  "openai-responses": (model, context, options) => streamOpenAIResponses(model as Model<"openai-responses">, context, options),
  "anthropic-messages": (model, context, options) => streamAnthropic(model as Model<"anthropic-messages">, context, options),
  "google-generative-ai": (model, context, options) => streamGoogle(model as Model<"google-generative-ai">, context, options),
};

/** Reads the stream to its end, telling `onText` the text so far as it grows; the whole message at the end. */
async function read(stream: AssistantMessageEventStream, onText?: CallOptions["onText"]): Promise<AssistantMessage> {
  if (onText) {
    for await (const event of stream) {
      if (event.type === "text_delta") onText(textOf(event.partial.content), event.partial.timestamp);
    }
  }
  return stream.result();
}

export async function callModel(env: Env, choice: ModelChoice, request: ModelRequest, opts: CallOptions = {}): Promise<ProviderCall> {
  if (choice.kind === "local") return { kind: "reply", message: localModel(request) };
  const { provider } = choice;
  const key = opts.key ?? apiKey(env, choice);
  const { result: message, seen } = await watchResponses(() =>
    read(
      CALLS[provider.api](
        piModel(choice),
        { systemPrompt: request.systemPrompt, messages: request.messages, tools: request.tools as never },
        {
          apiKey: key,
          headers: authHeaders(provider, key),
          maxTokens: choice.settings.maxTokens,
          // Anthropic: breakpoints on the tools, the system prompt and the last message (the prefix the next call repeats).
          // OpenAI and Gemini cache on their own; the cached share comes back in the usage either way.
          cacheRetention: "short",
          sessionId: opts.cacheKey,
          // The agent's object decides retries, with backoff: the SDKs must not retry inside one call.
          maxRetries: 0,
          // One deadline for every API (the Gemini SDK takes no timeout).
          signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
          ...(opts.onAccepted ? { onResponse: opts.onAccepted } : {}),
        },
      ),
      opts.onText,
    ),
  );
  opts.onAnswer?.(message);
  if (message.stopReason === "aborted") return { kind: "retry", error: `the model provider did not answer within ${REQUEST_TIMEOUT_MS / 1000} s` };
  if (message.stopReason !== "error") return { kind: "reply", message };
  // The error reaches the chat and SQLite: a provider that echoes the key must not leak it.
  const raw = message.errorMessage ?? "the provider returned an error";
  const failure = providerError(provider.auth ? raw.replaceAll(key, "[redacted]") : raw);
  // The SDK's text names the status; a response the SDK could not describe still has one.
  const status = failure.status ?? (seen && seen.status >= 400 ? seen.status : undefined);
  // OpenAI "maximum context length is N tokens" (context_length_exceeded), Anthropic "prompt is too long" (or a 413),
  // Gemini "input token count … exceeds the maximum": whatever the status, sending it again as it is cannot help.
  // OpenAI's code says so whatever its message's wording.
  if (isContextOverflow(message) || errorCode(seen?.errorBody) === "context_length_exceeded") {
    return { kind: "refused", error: `the request is too long for the model (${failure.text})`, status, tooLong: true };
  }
  // OpenAI's 429 for a key out of credit is no rate limit: waiting cannot end it.
  if (status !== undefined && (REFUSED.has(status) || errorCode(seen?.errorBody) === "insufficient_quota")) {
    return { kind: "refused", error: `the model provider refused the request (${failure.text})`, status };
  }
  // Gemini says when to come back in its body (RetryInfo), the others in headers.
  const retryAfterSeconds = failure.retryAfterSeconds ?? (seen && seen.status === status ? waitFromHeaders(seen.headers) : undefined);
  return { kind: "retry", error: failure.text, status, retryAfterSeconds };
}

/** The pi-ai model for a choice: the table's settings under the operator's provider id, API and base URL. */
function piModel(choice: Extract<ModelChoice, { kind: "provider" }>): Model<Api> {
  const { provider, model, settings } = choice;
  return {
    id: model,
    name: model,
    api: provider.api,
    provider: provider.id,
    baseUrl: provider.baseUrl,
    reasoning: settings.reasoning,
    ...(settings.thinkingLevelMap ? { thinkingLevelMap: settings.thinkingLevelMap } : {}),
    ...(settings.compat ? { compat: settings.compat } : {}),
    input: settings.images ? ["text", "image"] : ["text"],
    cost: settings.cost,
    contextWindow: settings.contextWindow,
    maxTokens: settings.maxTokens,
  };
}

/** The operator's key for a provider: its Worker secret's value. A tenant's own key is never read here. */
export function apiKey(env: Env, choice: Extract<ModelChoice, { kind: "provider" }>): string {
  const { provider } = choice;
  if (choice.byok) throw new ConfigError("a tenant's own key is opened by its courier, never read from the environment");
  if (!provider.auth) return "none";
  const value = environmentSecret(env, provider.auth.secret);
  // Retrying cannot set it: the turn fails at once, naming what to set.
  if (!value) throw new ConfigError(`the Worker secret ${provider.auth.secret} named by provider ${provider.id} is not set`);
  return value;
}

/** A gateway that wants the key in another header gets it there too. */
function authHeaders(provider: ProviderConfig, key: string): Record<string, string> | undefined {
  const header = provider.auth?.header;
  if (!header || header.toLowerCase() === "authorization") return undefined;
  return { [header]: key };
}

/**
 * pi-ai keeps only the SDK's error text. The OpenAI and Anthropic SDKs put the
 * HTTP status first ("429 {…}"); the Gemini SDK gives the JSON error body
 * ({"error":{"code":429,…,"details":[{RetryInfo "retryDelay":"30s"}]}}). A JSON
 * body is reduced to its message, so the person reads a sentence.
 */
function providerError(text: string): { text: string; status?: number; retryAfterSeconds?: number } {
  const prefixed = /^(\d{3}) ([\s\S]*)$/.exec(text);
  const body = jsonError(prefixed ? prefixed[2]! : text);
  const status = prefixed ? Number(prefixed[1]) : typeof body?.code === "number" ? body.code : undefined;
  if (!body) return { text, status };
  const delay = /^(\d+(?:\.\d+)?)s$/.exec(String(body.details?.find((d) => d.retryDelay)?.retryDelay ?? ""));
  return {
    text: status === undefined ? body.message : `${status} ${body.message}`,
    status,
    retryAfterSeconds: delay ? Math.ceil(Number(delay[1])) : undefined,
  };
}

interface JsonError {
  code?: unknown;
  message: string;
  details?: { retryDelay?: unknown }[];
}

function jsonError(text: string): JsonError | undefined {
  try {
    const error = (JSON.parse(text) as { error?: JsonError }).error;
    return typeof error?.message === "string" ? error : undefined;
  } catch {
    return undefined;
  }
}

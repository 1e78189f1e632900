// The model queue consumer: the only place a provider is called. It reads the
// request from the object, calls the provider with pi-ai, and delivers the
// reply back as an event; it acks only after the object has it.
import type { AssistantMessage, Model } from "@mariozechner/pi-ai";
import { streamOpenAICompletions } from "@mariozechner/pi-ai/openai-completions";
import { secretNamed } from "../lib/config.ts";
import { modelChoice, retryBaseSeconds, type ProviderConfig } from "./config.ts";
import { agentStub } from "./ingress.ts";
import { localModel } from "./local-model.ts";
import type { ModelJobMessage, ModelOutcome, ModelRequest } from "./model-job.ts";
import { z } from "zod";

const jobMessageSchema = z.object({ tenant: z.string(), agent: z.string(), jobId: z.string() });

/** A provider's refusal of the request itself: retrying cannot help. */
const REFUSED = new Set([400, 401, 403, 404, 422]);
const MAX_DELAY_SECONDS = 300;

export type ProviderCall =
  | { kind: "reply"; message: AssistantMessage }
  | { kind: "refused"; error: string }
  | { kind: "retry"; error: string };

export async function callModel(env: Env, request: ModelRequest): Promise<ProviderCall> {
  const choice = modelChoice(env);
  if (choice.kind === "local") return { kind: "reply", message: localModel(request) };
  const key = apiKey(env, choice.provider);
  // No retry can set a secret: the turn fails now, saying which one.
  if (key === null) return { kind: "refused", error: `not configured: the Worker secret ${choice.provider.auth!.secret} is not set` };
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

/** The provider's key; null when the secret its config names is not set. */
function apiKey(env: Env, provider: ProviderConfig): string | null {
  if (!provider.auth) return "none";
  return secretNamed(env, provider.auth.secret) ?? null;
}

/** A provider that wants its key in a header other than Authorization gets it there. */
function authHeaders(provider: ProviderConfig, key: string): Record<string, string> | undefined {
  if (!provider.auth || provider.auth.header.toLowerCase() === "authorization") return undefined;
  return { [provider.auth.header]: key };
}

export async function consumeModelJobs(batch: MessageBatch<unknown>, env: Env): Promise<void> {
  for (const msg of batch.messages) {
    const parsed = jobMessageSchema.safeParse(msg.body);
    if (!parsed.success) {
      console.error("dropping a malformed model job message", parsed.error.message);
      msg.ack();
      continue;
    }
    const job: ModelJobMessage = parsed.data;
    try {
      const request = await agentStub(env, job).modelJob(job, job.jobId);
      if (!request) {
        msg.ack(); // done or discarded: no provider call
        continue;
      }
      const call = await callModel(env, request);
      if (call.kind === "retry") {
        const delaySeconds = Math.min(MAX_DELAY_SECONDS, Math.round(retryBaseSeconds(env) * 2 ** (msg.attempts - 1)));
        console.warn(`model job ${job.jobId} attempt ${msg.attempts} failed (${call.error}); retrying in ${delaySeconds}s`);
        msg.retry({ delaySeconds });
        continue;
      }
      const outcome = call.kind === "reply" ? { ok: true as const, message: call.message } : { ok: false as const, error: call.error };
      await deliver(env, job, outcome);
      msg.ack();
    } catch (err) {
      console.error(`model job ${job.jobId} attempt ${msg.attempts} threw; retrying`, err);
      msg.retry({ delaySeconds: Math.min(MAX_DELAY_SECONDS, Math.round(retryBaseSeconds(env) * 2 ** (msg.attempts - 1))) });
    }
  }
}

/**
 * The reply is in hand, so a delivery that fails because the object was reset
 * meanwhile (its old stub is broken) is tried once more on a fresh stub before
 * the message is retried, which would ask the provider again.
 */
async function deliver(env: Env, job: ModelJobMessage, outcome: ModelOutcome): Promise<void> {
  try {
    await agentStub(env, job).deliverModelResult(job, job.jobId, outcome);
  } catch (err) {
    console.warn(`delivering ${job.jobId} failed once (${err instanceof Error ? err.message : String(err)}); trying a fresh stub`);
    await agentStub(env, job).deliverModelResult(job, job.jobId, outcome);
  }
}

/** Jobs the queue gave up on: the turn fails with a sentence the person sees. */
export async function consumeDeadModelJobs(batch: MessageBatch<unknown>, env: Env): Promise<void> {
  for (const msg of batch.messages) {
    const parsed = jobMessageSchema.safeParse(msg.body);
    if (parsed.success) {
      const job = parsed.data;
      await agentStub(env, job).deliverModelResult(job, job.jobId, {
        ok: false,
        error: "the model provider did not answer after several attempts. Please try again in a moment.",
      });
    }
    msg.ack();
  }
}

const DEAD_LETTER_SUFFIX = "-dlq";

/** The Worker's queue handler: model jobs, and the jobs their queue gave up on. */
export async function consumeQueue(batch: MessageBatch<unknown>, env: Env): Promise<void> {
  if (batch.queue.endsWith(DEAD_LETTER_SUFFIX)) await consumeDeadModelJobs(batch, env);
  else await consumeModelJobs(batch, env);
}

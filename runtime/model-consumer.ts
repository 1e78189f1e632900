// The model queue consumer: the only place a provider is called. It reads the
// request from the object, calls the provider with pi-ai, and delivers the
// reply back as an event; it acks only after the object has it.
import { modelChoice, retryBaseSeconds } from "./config.ts";
import { agentStub } from "./ingress.ts";
import type { ModelJobMessage, ModelOutcome } from "./model-job.ts";
import { callModel } from "./models/index.ts";
import { z } from "zod";

const jobMessageSchema = z.object({ tenant: z.string(), agent: z.string(), jobId: z.string() });

const MAX_DELAY_SECONDS = 300;

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
      const call = await callModel(env, modelChoice(env), request, { cacheKey: `${job.tenant}/${job.agent}` });
      if (call.kind === "retry") {
        const delaySeconds = Math.min(MAX_DELAY_SECONDS, call.retryAfterSeconds ?? Math.round(retryBaseSeconds(env) * 2 ** (msg.attempts - 1)));
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

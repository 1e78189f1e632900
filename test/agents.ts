// Reaching the real AgentObject from a test: stubs, eviction, and its tables.
import { env } from "cloudflare:workers";
import { createExecutionContext, createMessageBatch, getQueueResult, runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import type { AgentObject } from "../runtime/agent-object.ts";
import type { Route } from "../runtime/index.ts";
import { consumeQueue } from "../runtime/model-consumer.ts";
import type { ModelJobMessage } from "../runtime/model-job.ts";

export function agent(tenant: string, name: string): DurableObjectStub<AgentObject> {
  const ns = env.AGENT as DurableObjectNamespace<AgentObject>;
  return ns.get(ns.idFromName(`${tenant}:${name}`));
}

/** Resets the object (as an eviction or crash would): in-memory state is gone, SQLite stays. */
export async function evict(tenant: string, name: string): Promise<void> {
  await runInDurableObject(agent(tenant, name), (_instance, state) => state.abort("evicted by the test")).catch(() => undefined);
}

/** Runs the object's pending alarm now (on a fresh instance after an eviction). */
export function fireAlarm(tenant: string, name: string): Promise<boolean> {
  return runDurableObjectAlarm(agent(tenant, name));
}

export function rows<T extends Record<string, SqlStorageValue>>(tenant: string, name: string, query: string, ...args: SqlStorageValue[]): Promise<T[]> {
  return runInDurableObject(agent(tenant, name), (_instance, state) => state.storage.sql.exec<T>(query, ...args).toArray());
}

export function alarmOf(tenant: string, name: string): Promise<number | null> {
  return runInDurableObject(agent(tenant, name), (_instance, state) => state.storage.getAlarm());
}

/**
 * Submits a message and runs one pass of the object with its queue binding
 * swapped for one that keeps the model job messages, so the consumer runs when
 * the test says. The object and its storage are real. Give it an agent of its
 * own: the swapped binding stays on that instance.
 */
export async function passHoldingJobs(route: Route, conversation: string, text: string): Promise<ModelJobMessage[]> {
  const sent: ModelJobMessage[] = [];
  await runInDurableObject(agent(route.tenant, route.agent), async (instance) => {
    const capture = { send: async (m: ModelJobMessage) => void sent.push(m) };
    Object.assign(instance, { env: Object.create(env, { MODEL_QUEUE: { value: capture } }) });
    await instance.submit(route, { id: crypto.randomUUID(), kind: "message", conversation, text, user: { platform: "api", id: "u" } });
    await instance.alarm();
  });
  return sent;
}

/** The model queue's consumer over `messages` (first delivery each): what it acked and retried, and after how long. */
export async function runConsumer(messages: ModelJobMessage[], { queue = "antiproton-model-jobs", workerEnv = env as Env } = {}) {
  const batch = createMessageBatch(
    queue,
    messages.map((body, i) => ({ id: `m${i}-${body.jobId}`, timestamp: new Date(), attempts: 1, body })),
  );
  // getQueueResult names the retried messages but not their delays.
  const retryDelays: Record<string, number | undefined> = {};
  for (const message of batch.messages) {
    const retry = message.retry.bind(message);
    message.retry = (options) => {
      retryDelays[message.id] = options?.delaySeconds;
      retry(options);
    };
  }
  const ctx = createExecutionContext();
  await consumeQueue(batch as MessageBatch<unknown>, workerEnv);
  return { ...(await getQueueResult(batch, ctx)), retryDelays };
}

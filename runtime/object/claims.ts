// The object's side of the effect protocol, one set of verbs for every kind of
// effect: a courier claims an effect (its lease starts) and gets the work as
// it is now, or null when it is no longer wanted; it performs it; it reports
// the outcome, and a report that changes nothing (a second one, a late one)
// is answered false. A model job's courier also tells the object, once, which
// message it streams the reply to (progress). The object decides everything
// else: retries, order, failure.
import { ConfigError } from "../../lib/config.ts";
import type { Gateway } from "../../plugins/index.ts";
import type { ApprovalFlow, ToolCalls, ToolReport, ToolWork, MountReport, MountWork, ToolLists } from "../tools/index.ts";
import type { BusyTime } from "../metering/index.ts";
import type { DeliveryResult, OutboxDelivery, ReplyAddress, Route, StreamShown } from "../chat.ts";
import { rateLimitPatienceSeconds, retryBaseSeconds, streamKey, type ModelClaim, type ProviderCall, type ModelJobs, type Settled } from "../models/index.ts";
import { streamReplies, type EffectKind, type Effects, type Outbox, type Typing } from "../effects/index.ts";
import type { PassContext } from "../pass-context.ts";
import type { Turns } from "../turns/index.ts";

/** What a claim hands the courier, by kind of effect. */
export interface EffectWork {
  /** The request, and the object's busy time for the ledger (runtime/metering/spend.ts). */
  model: ModelClaim;
  send: OutboxDelivery;
  typing: ReplyAddress;
  tool: ToolWork;
  hold: ToolWork;
  mount: MountWork;
}

/** What the courier reports, by kind of effect. */
export interface EffectReport {
  /** `shown`: the message the reply was streamed to, if one was opened. */
  model: { call: ProviderCall; shown?: StreamShown };
  send: DeliveryResult;
  /** A lost indicator is not worth a retry: the next one is due in seconds. */
  typing: null;
  tool: ToolReport;
  hold: ToolReport;
  mount: MountReport;
}

/** A provider call that failed this many times in a row fails its turn. */
const MAX_MODEL_RETRIES = 3;
const MAX_RETRY_DELAY_SECONDS = 300;

export interface ClaimParts {
  storage: DurableObjectStorage;
  env: Env;
  effects: Effects;
  jobs: ModelJobs;
  turns: Turns;
  outbox: Outbox;
  typing: Typing;
  tools: ToolCalls;
  approvals: ApprovalFlow;
  toolLists: ToolLists;
  busyTime: BusyTime;
  wake: () => Promise<void>;
  /** Mounts and model as they are now. */
  context: (route: Route) => PassContext;
  gateway: () => Gateway;
}

export class Claims {
  constructor(private readonly parts: ClaimParts) {}

  async claim(route: Route, kind: EffectKind, id: string): Promise<EffectWork[EffectKind] | null> {
    const { storage, outbox, typing, tools, approvals, toolLists, wake, context, gateway } = this.parts;
    switch (kind) {
      case "model":
        return this.claimModel(id);
      case "send":
        return storage.transactionSync(() => outbox.claim(route, Number(id)));
      case "typing":
        return storage.transactionSync(() => typing.claim(id));
      case "tool":
      case "hold": {
        // The work under the mount's policy as it is now.
        const pass = context(route);
        const work = storage.transactionSync(() => (kind === "tool" ? tools.claim(pass, id) : approvals.claim(pass, id)));
        if (!work) await wake();
        return work;
      }
      case "mount":
        return storage.transactionSync(() => toolLists.claim(gateway(), id));
    }
  }

  /** The courier opened the message it streams a job's reply to (or its ref changed): the outbox finishes it later. */
  progress(jobId: string, shown: StreamShown): void {
    if (this.parts.jobs.get(jobId)) this.parts.outbox.recordStream(streamKey(jobId), shown);
  }

  async report(route: Route, kind: EffectKind, id: string, outcome: EffectReport[EffectKind]): Promise<boolean> {
    const { storage, outbox, typing, tools, approvals, toolLists, wake } = this.parts;
    if (kind === "model") return this.reportModel(id, outcome as EffectReport["model"]);
    const taken = storage.transactionSync(() => {
      switch (kind) {
        case "send":
          return outbox.settle(Number(id), outcome as EffectReport["send"]);
        case "typing":
          return typing.report(id);
        case "tool":
          return tools.report(id, outcome as EffectReport["tool"]);
        case "hold":
          return approvals.report(route, id, outcome as EffectReport["hold"]);
        case "mount":
          return toolLists.report(id, outcome as EffectReport["mount"]);
      }
    });
    await wake();
    return taken;
  }

  private async claimModel(jobId: string): Promise<ModelClaim | null> {
    const { storage, env, jobs, turns, busyTime } = this.parts;
    const found = await jobs.claim(jobId);
    if (found && "lost" in found) {
      // Without its request the job can never run: fail the turn rather than leave it waiting.
      await this.settleJob(jobId, { kind: "failed", error: "the stored model request was lost; please send your message again" });
      return null;
    }
    if (!found) return null;
    let stream: boolean;
    try {
      stream = streamReplies(env);
    } catch (err) {
      if (!(err instanceof ConfigError)) throw err;
      await this.settleJob(jobId, { kind: "failed", error: `configuration error: ${err.message}` });
      return null;
    }
    const target = stream ? storage.transactionSync(() => turns.streamTarget(jobs.get(jobId)!)) : undefined;
    return { request: found.request, busy: busyTime.toShip(), ...(target ? { stream: target } : {}) };
  }

  /** A provider call's outcome: a reply or a refusal settles the job; a failure worth retrying is retried, a few times. */
  private async reportModel(jobId: string, { call, shown }: EffectReport["model"]): Promise<boolean> {
    const { storage, env, effects, jobs, turns, outbox, wake } = this.parts;
    // The message its reply was streamed to: the outbox finishes it when the job settles (or now, for a stopped turn's).
    const streamed = shown && jobs.get(jobId);
    if (streamed) {
      storage.transactionSync(() => {
        outbox.recordStream(streamKey(jobId), shown);
        if (streamed.status === "discarded") turns.finishStream(streamed, shown.shown);
      });
      if (streamed.status === "discarded") await wake();
    }
    // A late reply to a stopped turn was paid for all the same: its usage is kept with its job.
    if (call.kind === "reply") jobs.recordUsage(jobId, call.message);
    if (call.kind === "reply") return this.settleJob(jobId, { kind: "reply", message: call.message });
    if (call.kind === "refused") return this.settleJob(jobId, { kind: "failed", error: call.error, tooLong: call.tooLong, verbatim: call.verbatim });
    if (call.kind === "limited") return this.waitOutRateLimit(jobId, call);
    const attempt = (effects.get("model", jobId)?.retries ?? 0) + 1;
    if (jobs.get(jobId)?.status !== "pending") return false;
    if (attempt > MAX_MODEL_RETRIES) {
      return this.settleJob(jobId, { kind: "failed", error: `the model provider did not answer after ${attempt} attempts (${call.error}). Please try again in a moment.` });
    }
    // The provider's own word on when to come back wins over the backoff.
    const delaySeconds = Math.min(MAX_RETRY_DELAY_SECONDS, call.retryAfterSeconds ?? retryBaseSeconds(env) * 2 ** (attempt - 1));
    console.warn(`model job ${jobId} attempt ${attempt} failed (${call.error}); retrying in ${delaySeconds}s`);
    effects.retryAt("model", jobId, Date.now() + delaySeconds * 1000);
    await wake();
    return true;
  }

  /** The provider (or its key's gate) said when to come back: the job is sent again then, no attempt counted, up to the patience. */
  private async waitOutRateLimit(jobId: string, limit: { until: number; error: string }): Promise<boolean> {
    const { storage, env, effects, jobs, turns, wake } = this.parts;
    const job = jobs.get(jobId);
    if (job?.status !== "pending") return false;
    let patienceMs: number;
    try {
      patienceMs = rateLimitPatienceSeconds(env) * 1000;
    } catch (err) {
      if (!(err instanceof ConfigError)) throw err;
      return this.settleJob(jobId, { kind: "failed", error: `configuration error: ${err.message}` });
    }
    const wait = storage.transactionSync(() => {
      const plan = jobs.rateLimited(job, limit, patienceMs);
      if ("fail" in plan) return plan;
      effects.retryAt("model", jobId, plan.wait, false);
      if (plan.tell) turns.post(job.conversation, { kind: "notice", text: plan.tell });
      return plan;
    });
    if ("fail" in wait) return this.settleJob(jobId, { kind: "failed", error: wait.fail });
    await wake();
    return true;
  }

  private async settleJob(jobId: string, settled: Settled): Promise<boolean> {
    const { storage, jobs, turns, wake } = this.parts;
    const job = jobs.get(jobId);
    if (!job || job.status !== "pending") return false;
    storage.transactionSync(() => turns.settle(job, settled));
    await wake();
    await jobs.dropLargeRequest(job);
    return true;
  }
}

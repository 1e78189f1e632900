// The object's side of the effect protocol, one set of verbs for every kind of
// effect. Where it can, an effect carries its work in the queue message
// (`dispatch`), so the hot path costs the object nothing between sending it
// and hearing the outcome. Where the work must be decided as it is performed
// (a tool call, a held call: a stop or a deny in between wins), or it is too
// large to travel, or a courier resumes work it was cut short on, the
// courier claims it (its lease starts) and gets the work as it is now, or
// null when it is no longer wanted. The courier performs it and reports the
// outcome; a report that changes nothing (a second one, a late one) is
// answered false. A model job's courier also tells the object, once, which
// message it streams the reply to (progress). The object decides everything
// else: retries, order, failure.
import { ConfigError } from "../../lib/config.ts";
import type { Gateway } from "../../plugins/index.ts";
import type { ApprovalFlow, Leases, LeaseReport, LeaseWork, ToolCalls, ToolReport, ToolWork, MountReport, MountWork, ToolLists } from "../tools/index.ts";
import type { BusyTime } from "../metering/index.ts";
import type { ReplyAddress, Route, StreamShown } from "../chat.ts";
import { rateLimitPatienceSeconds, retryBaseSeconds, streamKey, type ModelWork, type ProviderCall, type ModelJobs, type Settled } from "../models/index.ts";
import { streamReplies, type Dispatch, type EffectKind, type EffectRow, type Effects, type Outbox, type RunResults, type SendRun, type Typing } from "../effects/index.ts";
import type { PassContext } from "../pass-context.ts";
import type { Turns } from "../turns/index.ts";
import type { AuditOutbox, AuditWork } from "./audit-outbox.ts";

/** The work a courier performs, by kind of effect: carried in the queue message, or claimed. */
export interface EffectWork {
  /** The request, and the object's busy time for the ledger (runtime/metering/spend.ts). */
  model: ModelWork;
  send: SendRun;
  typing: ReplyAddress;
  tool: ToolWork;
  hold: ToolWork;
  mount: MountWork;
  lease: LeaseWork;
  audit: AuditWork;
}

/** What the courier reports, by kind of effect. */
export interface EffectReport {
  /** `shown`: the message the reply was streamed to, if one was opened. */
  model: { call: ProviderCall; shown?: StreamShown };
  send: RunResults;
  /** A lost indicator is not worth a retry: the next one is due in seconds. */
  typing: null;
  tool: ToolReport;
  hold: ToolReport;
  mount: MountReport;
  lease: LeaseReport;
  audit: null;
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
  leases: Leases;
  audits: AuditOutbox;
  busyTime: BusyTime;
  wake: () => void;
  /** Runs a pass now (or waits for the running one to go round again). */
  drive: () => Promise<void>;
  /** Mounts and model as they are now. */
  context: (route: Route) => PassContext;
  gateway: () => Gateway;
}

/** What the object answers a report: whether it was taken, and a chat run for the courier to send next, if one was handed to it. */
export interface ReportAnswer {
  taken: boolean;
  run?: SendRun;
}

export class Claims {
  /** Couriers whose model report is being answered, by conversation: its next chat run goes to them. */
  private readonly waitingForRun = new Map<string, (run: SendRun) => void>();

  constructor(private readonly parts: ClaimParts) {}

  /** What travels with a due effect: its work now, "claim" when it must be decided as it is performed, or null when it is no longer wanted. */
  dispatch(route: Route, row: EffectRow): Dispatch {
    const { outbox, typing, toolLists, leases, audits, gateway } = this.parts;
    const carried = (work: EffectWork[EffectKind] | null): Dispatch => work && { work };
    switch (row.kind) {
      case "model":
        return this.modelWork(row.id);
      case "send": {
        const run = outbox.run(route, Number(row.id));
        // A courier that reported this conversation's model call waits for its chat run: it sends it, no queue between.
        const waiting = run && this.waitingForRun.get(row.conversation);
        if (!run || !waiting) return carried(run);
        this.waitingForRun.delete(row.conversation);
        waiting(run);
        return "taken";
      }
      case "typing":
        return carried(typing.work(row.id));
      case "mount":
        return carried(toolLists.work(gateway(), row.id));
      case "lease":
        return carried(leases.work(row.id));
      case "audit":
        return carried(audits.work(row.id));
      case "tool":
      case "hold":
        return "claim";
    }
  }

  async claim(route: Route, kind: EffectKind, id: string): Promise<EffectWork[EffectKind] | null> {
    const { storage, effects, outbox, typing, tools, approvals, toolLists, leases, audits, wake, context, gateway } = this.parts;
    const claimed = storage.transactionSync(() => effects.claim(kind, id));
    if (!claimed) return null;
    switch (kind) {
      case "model":
        return this.claimModel(id);
      case "send":
        return storage.transactionSync(() => outbox.run(route, Number(id)));
      case "typing":
        return this.orDone(kind, id, typing.work(id));
      case "tool":
      case "hold": {
        // The work under the mount's policy as it is now.
        const pass = context(route);
        const replay = claimed.earlierClaims > 0;
        const work = storage.transactionSync(() => {
          const claimed = kind === "tool" ? tools.claim(pass, id, replay) : approvals.claim(pass, id, replay);
          // A machine's lease opens before the call can start it.
          if (claimed) leases.claimed(pass, claimed);
          return claimed;
        });
        if (!work) wake();
        return work;
      }
      case "mount":
        return this.orDone(kind, id, toolLists.work(gateway(), id));
      case "lease":
        return this.orDone(kind, id, leases.work(id));
      case "audit":
        return this.orDone(kind, id, audits.work(id));
    }
  }

  /** Work no longer wanted ends its effect. */
  private orDone<T>(kind: EffectKind, id: string, work: T | null): T | null {
    if (work === null) this.parts.effects.done(kind, id);
    return work;
  }

  /** The courier opened the message it streams a job's reply to (or its ref changed): the outbox finishes it later. */
  progress(jobId: string, shown: StreamShown): void {
    if (this.parts.jobs.get(jobId)) this.parts.outbox.recordStream(streamKey(jobId), shown);
  }

  async report(route: Route, kind: EffectKind, id: string, outcome: EffectReport[EffectKind]): Promise<ReportAnswer> {
    if (kind === "model") return this.reportModel(id, outcome as EffectReport["model"]);
    return { taken: await this.settle(route, kind, id, outcome) };
  }

  private async settle(route: Route, kind: Exclude<EffectKind, "model">, id: string, outcome: EffectReport[EffectKind]): Promise<boolean> {
    const { storage, outbox, typing, tools, approvals, toolLists, leases, audits, wake } = this.parts;
    const taken = storage.transactionSync(() => {
      const call = kind === "tool" || kind === "hold" ? (outcome as ToolReport) : undefined;
      if (call?.lease) leases.reported(call.alias, call.lease);
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
        case "lease":
          return leases.report(id, outcome as EffectReport["lease"]);
        case "audit":
          return audits.report(id);
      }
    });
    wake();
    return taken;
  }

  /** A pending job's work when its request travels in the message; "claim" when it is in R2; null once it is settled. */
  private modelWork(jobId: string): Dispatch {
    const request = this.parts.jobs.request(jobId);
    if (request === null) return null;
    if (request === "large") return "claim";
    const rest = this.modelExtras(jobId);
    return rest && { work: { request, ...rest } };
  }

  private async claimModel(jobId: string): Promise<ModelWork | null> {
    const { jobs } = this.parts;
    const request = jobs.request(jobId) === "large" ? await jobs.largeRequest(jobId) : jobs.request(jobId);
    if (request !== null && typeof request === "object") {
      // Without its request the job can never run: fail the turn rather than leave it waiting.
      await this.settleJob(jobId, { kind: "failed", error: "the stored model request was lost; please send your message again" });
      return null;
    }
    if (request === null || request === "large") return null;
    const rest = this.modelExtras(jobId);
    return rest && { request, ...rest };
  }

  /** The busy time for the ledger, where to stream the reply and whether Responses streams hear it; a configuration that cannot work fails the job (null). */
  private modelExtras(jobId: string): Omit<ModelWork, "request"> | null {
    const { storage, env, jobs, turns, busyTime } = this.parts;
    const job = jobs.get(jobId)!;
    let stream: boolean;
    try {
      stream = streamReplies(env);
    } catch (err) {
      if (!(err instanceof ConfigError)) throw err;
      storage.transactionSync(() => turns.settle(job, { kind: "failed", error: `configuration error: ${err.message}` }));
      return null;
    }
    const target = stream ? storage.transactionSync(() => turns.streamTarget(job)) : undefined;
    return { busy: busyTime.toShip(), ...(target ? { stream: target } : {}), ...(job.purpose === "chat" ? { followed: true as const } : {}) };
  }

  /**
   * A provider call's outcome. A reply settles the job, and the pass that
   * follows runs before the answer: if it leaves a chat run of the
   * conversation due now (the turn's reply and its final status), the courier
   * is handed it to send at once rather than through the queue.
   */
  private async reportModel(jobId: string, outcome: EffectReport["model"]): Promise<ReportAnswer> {
    const conversation = this.parts.jobs.get(jobId)?.conversation;
    if (outcome.call.kind !== "reply" || conversation === undefined || this.waitingForRun.has(conversation)) return { taken: await this.settleModel(jobId, outcome) };
    let run: SendRun | undefined;
    this.waitingForRun.set(conversation, (handed) => (run = handed));
    try {
      const taken = await this.settleModel(jobId, outcome);
      if (taken) await this.parts.drive();
      return { taken, ...(run ? { run } : {}) };
    } finally {
      this.waitingForRun.delete(conversation);
    }
  }

  /** A reply or a refusal settles the job; a failure worth retrying is retried, a few times. */
  private async settleModel(jobId: string, { call, shown }: EffectReport["model"]): Promise<boolean> {
    const { storage, env, effects, jobs, turns, outbox, wake } = this.parts;
    // The message its reply was streamed to: the outbox finishes it when the job settles (or now, for a stopped turn's).
    const streamed = shown && jobs.get(jobId);
    if (streamed) {
      storage.transactionSync(() => {
        outbox.recordStream(streamKey(jobId), shown);
        if (streamed.status === "discarded") turns.finishStream(streamed, shown.shown);
      });
      if (streamed.status === "discarded") wake();
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
    wake();
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
    wake();
    await jobs.dropLargeRequest(job);
    return true;
  }
}

// The courier: a small Durable Object that does the waiting the agent's
// object never does. COURIER_SHARDS per agent, each working its lanes (one
// kind of effect of one conversation) side by side and each lane in order; it
// keeps an effect in its own SQLite until the object has the outcome, so a
// crash resumes the work and an outcome is never paid for twice
// (docs/design.md, "Couriers").
import { DurableObject } from "cloudflare:workers";
import * as z from "zod";
import { ConfigError } from "../../lib/config.ts";
import { type Migration, runMigrations } from "../../lib/migrations.ts";
import { type DeliveryResult, type Route, type StreamTarget, outboundFor, type RuntimeDeps } from "../chat.ts";
import type { AssistantMessage } from "@mariozechner/pi-ai";
import { callProvider, modelChoice, type GatedCall, type ModelPick, type ModelRequest } from "../models/index.ts";
import { courierName, type EffectKind, type EffectMessage, toCouriers } from "../effects/index.ts";
import { type EffectReport, type EffectWork, type ReportAnswer, agentStub } from "../object/index.ts";
import { countHeld, countJob, type HourBusy, type PaidAnswer, spendRefusal } from "../metering/index.ts";
import type { HeldSpan } from "../../plugins/index.ts";
import { ChatSends, errorText } from "./sends.ts";
import { ReplyStream } from "./reply-stream.ts";
import { PartialTexts } from "./partial-texts.ts";
import { MountCalls } from "./mount-calls.ts";
import { ScriptCaller } from "./script-caller.ts";
import { appendAudit } from "./audit-append.ts";
import { resolveSecret } from "../control/index.ts";
import { textOf } from "../store/index.ts";
import { imageLimits, picturesIn } from "../store/index.ts";
import { countedNamespace } from "../../lib/object-calls.ts";

/**
 * Armed while the courier works: a courier cut short (evicted, the process
 * killed) runs its alarm again after this, and resumes the task it still holds.
 */
const WATCHDOG_MS = 5_000;
/** A courier that cannot reach the agent's object tries again after this, doubling. */
const REPORT_RETRY_MS = 2_000;
const MAX_REPORT_RETRY_MS = 60_000;

/** Append-only (lib/migrations.ts): the first adopts the table releases before versioning created on first use. */
const MIGRATIONS: readonly Migration[] = [
  { name: "tasks", sql: "CREATE TABLE IF NOT EXISTS tasks (seq INTEGER PRIMARY KEY AUTOINCREMENT, kind TEXT NOT NULL, id TEXT NOT NULL, body TEXT NOT NULL, failures INTEGER NOT NULL, starts INTEGER NOT NULL, outcome TEXT, UNIQUE (kind, id))" },
  // A courier per lane held one lane's tasks: theirs resume as the lane ''.
  { name: "lanes side by side", sql: "ALTER TABLE tasks ADD COLUMN lane TEXT NOT NULL DEFAULT ''; CREATE INDEX tasks_by_lane ON tasks (lane, seq)" },
  // What the provider was paid for, written as the answer is read, until the ledgers have it.
  { name: "paid answers", sql: "CREATE TABLE paid (id TEXT PRIMARY KEY, task INTEGER NOT NULL, answer TEXT NOT NULL)" },
];

/** `starts`: runs that began the task (above one, an earlier run may have done it); `outcome`: the report to make, once in hand. */
type Task = { seq: number; body: string; failures: number; starts: number; outcome: string | null };
/**
 * What a task's run reports: the kind's outcome, or nothing when the work was
 * no longer wanted. `busy`: the object's busy time the job carried, to count
 * in the ledgers once it is reported and its reply sent. `paid` is only in an
 * outcome an earlier release stored: the answer now goes to the paid table.
 */
type Outcome = { kind: EffectKind; report: EffectReport[EffectKind]; paid?: Paid; busy?: HourBusy[] } | null;
/** An answer the provider was paid for, under its own id: a job called twice was paid twice. */
type Paid = { id: string; pick: ModelPick; message: AssistantMessage; child: boolean };
/** A paid answer or a held span (a machine's time) waiting for the ledgers: `answer` is a PaidEntry. */
type PaidRow = { id: string; answer: string };
type PaidEntry = { route: Route } & ({ paid: Paid } | { held: HeldSpan });
/** The task of a held span: none (a machine's end is counted at once, and by the alarm if a ledger could not take it). */
const NO_TASK = 0;

export class Courier extends DurableObject<Env> {
  private readonly mounts: MountCalls;
  private readonly sends: ChatSends;
  /** The text its model calls are writing, for the Responses streams that listen. */
  private readonly partials = new PartialTexts();
  /** Lanes being worked, and those given a task meanwhile (their run looks again before it ends). */
  private readonly working = new Map<string, Promise<void>>();
  private readonly workAgain = new Set<string>();
  private watchdogArmed = false;
  private hasTable = false;

  constructor(
    ctx: DurableObjectState,
    env: Env,
    private readonly deps: RuntimeDeps,
  ) {
    super(ctx, env);
    this.mounts = new MountCalls(env, deps.plugins, (route, held) => this.keepHeld(route, held));
    this.sends = new ChatSends(env, deps);
  }

  /**
   * Takes effects, in order, and starts on them; answers once they are
   * written down. A copy of one it holds is ignored while its work may be
   * under way; once its outcome is in hand, a later send of it (the object
   * answered the report and sent it again: a retry) is new work, and the
   * held task keeps only its report to make, under another key.
   */
  async take(effects: EffectMessage[]): Promise<void> {
    this.table();
    const sql = this.ctx.storage.sql;
    const lanes = new Set<string>();
    // Whether a row went in is what RETURNING answers: rowsWritten is a billing count, and an ignored insert into this table still counts 1.
    const insert = (effect: EffectMessage) =>
      sql.exec("INSERT INTO tasks (kind, id, body, failures, starts, lane) VALUES (?, ?, ?, 0, 0, ?) ON CONFLICT (kind, id) DO NOTHING RETURNING seq", effect.kind, effect.id, JSON.stringify(effect), effect.lane).toArray().length > 0;
    for (const effect of effects) {
      if (insert(effect) || (this.freedForLaterSend(effect) && insert(effect))) lanes.add(effect.lane);
    }
    for (const lane of lanes) this.work(lane).catch((err: unknown) => console.error("courier: work failed; its watchdog resumes it", err));
  }

  /**
   * The text the model calls of a lane (runtime/effects' modelLane) are
   * writing, as they write it, until the caller cancels: a Responses stream
   * listens here (runtime/courier/partial-texts.ts).
   */
  listen(lane: string): ReadableStream<Uint8Array> {
    return this.partials.listen(lane);
  }

  /** The watchdog (or a retry's wait) ran out: resume every lane that holds a task. */
  override async alarm(): Promise<void> {
    this.table();
    this.watchdogArmed = false;
    const lanes = this.ctx.storage.sql.exec<{ lane: string }>("SELECT DISTINCT lane FROM tasks").toArray();
    await Promise.all([...lanes.map(({ lane }) => this.work(lane)), this.countLeftovers()]);
  }

  /** Works through a lane's tasks in order, one run at a time; a task taken meanwhile is worked on by the same run. */
  private work(lane: string): Promise<void> {
    const running = this.working.get(lane);
    if (running) {
      this.workAgain.add(lane);
      return running;
    }
    const run = (async () => {
      try {
        do {
          this.workAgain.delete(lane);
          await this.drain(lane);
        } while (this.workAgain.has(lane));
      } finally {
        this.working.delete(lane);
      }
    })();
    this.working.set(lane, run);
    return run;
  }

  private async drain(lane: string): Promise<void> {
    this.table();
    // Written before the work starts (once while any lane works), so a crash from here on is resumed.
    if (!this.watchdogArmed) {
      this.watchdogArmed = true;
      await this.ctx.storage.setAlarm(Date.now() + WATCHDOG_MS);
    }
    const sql = this.ctx.storage.sql;
    for (;;) {
      const task = sql.exec<Task>("SELECT seq, body, failures, starts, outcome FROM tasks WHERE lane = ? ORDER BY seq LIMIT 1", lane).toArray()[0];
      if (!task) break;
      const effect = JSON.parse(task.body) as EffectMessage;
      try {
        let outcome = task.outcome === null ? undefined : (JSON.parse(task.outcome) as Outcome);
        if (outcome === undefined) {
          sql.exec("UPDATE tasks SET starts = starts + 1 WHERE seq = ?", task.seq);
          outcome = await this.perform(effect, task.starts > 0, task.seq);
          sql.exec("UPDATE tasks SET outcome = ? WHERE seq = ?", JSON.stringify(outcome), task.seq);
        }
        if (outcome) await this.reported(effect, outcome, task.seq);
      } catch (err) {
        // The agent's object could not be reached: keep the task (and the lane's order) and try again later.
        const wait = Math.min(MAX_REPORT_RETRY_MS, REPORT_RETRY_MS * 2 ** task.failures);
        console.warn(`courier: ${effect.kind} ${effect.id} failed (${err instanceof Error ? err.message : String(err)}); again in ${wait} ms`);
        sql.exec("UPDATE tasks SET failures = failures + 1 WHERE seq = ?", task.seq);
        // Another lane still working keeps the watchdog, which resumes this one sooner.
        if (this.working.size === 1) await this.ctx.storage.setAlarm(Date.now() + wait);
        return;
      }
      sql.exec("DELETE FROM tasks WHERE seq = ?", task.seq);
    }
    // The last lane at work, and nothing left: at rest, no alarm (an empty task table stays: dropping the database each time cost more CPU than the rest of the courier's work).
    if (this.working.size > 1 || sql.exec("SELECT 1 FROM tasks LIMIT 1").toArray().length > 0) return;
    this.watchdogArmed = false;
    // A paid answer a ledger could not take yet is counted again later.
    if (sql.exec("SELECT 1 FROM paid LIMIT 1").toArray().length > 0) await this.ctx.storage.setAlarm(Date.now() + REPORT_RETRY_MS);
    else await this.ctx.storage.deleteAlarm();
  }

  /** A copy of a held task whose outcome is in hand, sent later than it: the held task's key is freed for the copy (true). */
  private freedForLaterSend(effect: EffectMessage): boolean {
    return (
      this.ctx.storage.sql
        .exec(
          "UPDATE tasks SET id = ? WHERE kind = ? AND id = ? AND outcome IS NOT NULL AND json_extract(body, '$.attempt') < ? RETURNING seq",
          reportedKey(effect),
          effect.kind,
          effect.id,
          effect.attempt,
        )
        .toArray().length > 0
    );
  }

  /** The task stays, under another key, for what follows its report; a copy of its effect taken from now on is a task of its own. */
  private freeKey(effect: EffectMessage, seq: number): void {
    this.ctx.storage.sql.exec("UPDATE tasks SET id = ? WHERE seq = ?", reportedKey(effect), seq);
  }

  private table(): void {
    if (this.hasTable) return;
    runMigrations(this.ctx.storage, MIGRATIONS);
    this.hasTable = true;
  }

  /** Does the effect's work: what it carries, or (resumed, or carrying none) what the object says now. */
  private async perform(effect: EffectMessage, resumed: boolean, seq: number): Promise<Outcome> {
    const workOf = async <K extends EffectKind>(kind: K): Promise<EffectWork[K] | null> =>
      !resumed && effect.work !== undefined ? (effect.work as EffectWork[K]) : this.claim(effect, kind);
    switch (effect.kind) {
      case "model": {
        const work = await workOf("model");
        if (!work) return null;
        const stream = this.replyStream(effect, work.stream);
        const request = JSON.parse(work.request) as ModelRequest;
        const onText = (text: string, calledAt: number) => {
          stream?.onText(text);
          if (work.followed) this.partials.write(effect.lane, calledAt, text);
        };
        const { call, paid } = await this.callModel(effect, request, onText).finally(() => this.partials.end(effect.lane));
        // Kept in the step that read the answer, before anything else can fail: a crash from here on counts it still.
        if (paid) this.keepPaid(effect, seq, { id: `${effect.id}:${crypto.randomUUID()}`, pick: request.model, message: paid, child: request.child === true });
        const shown = await stream?.finish(call.kind === "reply" ? textOf(call.message.content) : undefined);
        return { kind: "model", report: { call, ...(shown ? { shown } : {}) }, busy: work.busy };
      }
      case "send": {
        const run = await workOf("send");
        if (!run) return null;
        return { kind: "send", report: await this.sends.run(run) };
      }
      case "typing": {
        const address = await workOf("typing");
        if (!address) return null;
        const typing = outboundFor(this.deps, address.platform)?.typing;
        const result: DeliveryResult = typing
          ? await this.sends.platformCall(() => typing(this.env, { tenant: effect.tenant, agent: effect.agent }, address))
          : { ok: false, error: `no typing indicator for platform ${address.platform}` };
        if (!result.ok) console.warn(`typing in ${address.platform} failed: ${result.error}`);
        return { kind: "typing", report: null };
      }
      case "tool":
      case "hold": {
        const work = await this.claim(effect, effect.kind);
        if (!work) return null;
        // A script's own tool calls (code mode) are performed here too, each one handed over by the object.
        const scripts = new ScriptCaller(this.env, effect, (child) => this.mounts.runTool(child));
        const report = await this.mounts.runTool(work, scripts);
        // The script was stopped because the object could not be reached: try the task again (its re-run gets recorded answers).
        if (scripts.unreachable) throw scripts.unreachable;
        return { kind: effect.kind, report };
      }
      case "mount": {
        const work = await workOf("mount");
        if (!work) return null;
        return { kind: "mount", report: await this.mounts.fetchTools(effect, work) };
      }
      case "lease": {
        const work = await workOf("lease");
        if (!work) return null;
        return { kind: "lease", report: await this.mounts.endLease(effect, work) };
      }
      case "audit": {
        const work = await workOf("audit");
        return work && { kind: "audit", report: await appendAudit(this.env, work) };
      }
    }
  }

  /** The effect's work as the object holds it now (its lease starts), or null when it is no longer wanted. */
  private async claim<K extends EffectKind>(effect: EffectMessage, kind: K): Promise<EffectWork[K] | null> {
    // RPC's types flatten a method generic in its kind (and give up on nested Message[]): the object answers per kind.
    return (await agentStub(this.env, effect).claim(effect, kind, effect.id)) as EffectWork[K] | null;
  }

  /**
   * The outcome is in hand: it is reported on a stub made now, not the one
   * the claim used before the call. An agent reset meanwhile (evicted,
   * redeployed) broke that stub for good, and a failed report retries the
   * task, which would do the work again.
   */
  private async report(effect: EffectMessage, kind: EffectKind, outcome: EffectReport[EffectKind]): Promise<ReportAnswer> {
    return (await agentStub(this.env, effect).report(effect, kind, effect.id, outcome)) as ReportAnswer;
  }

  /**
   * Reports an outcome, sends the chat run the object handed back (the turn's
   * reply), reporting that too, then counts what the provider was paid for and
   * the object's busy time: no ledger call is on the way of the model request
   * or of the reply. A crash after the report leaves the run to its lease (it
   * is sent again, looked for first) and the count to the paid table (each
   * answer under its own id: counted once; busy time is a running total, taken
   * at its highest).
   */
  private async reported(effect: EffectMessage, outcome: NonNullable<Outcome>, seq: number): Promise<void> {
    if (outcome.paid) this.keepPaid(effect, seq, outcome.paid);
    const answer = await this.report(effect, outcome.kind, outcome.report);
    // The object has the outcome: a copy of the effect it sends from now on (a retry) is new work, not this task's.
    this.freeKey(effect, seq);
    if (answer.run) {
      const head = answer.run.deliveries[0]!.row;
      await agentStub(this.env, effect).report(effect, "send", String(head), await this.sends.run(answer.run));
    }
    const paid = this.ctx.storage.sql.exec<PaidRow>("SELECT id, answer FROM paid WHERE task = ?", seq).toArray();
    if (paid.length === 0) await countJob(this.env, effect, outcome.busy ?? [], null);
    for (const [index, row] of paid.entries()) await this.countPaid(row, index === 0 ? (outcome.busy ?? []) : []);
  }

  /** Writes a paid answer down under its task until the ledgers have it. */
  private keepPaid(route: Route, seq: number, paid: Paid): void {
    this.keep(paid.id, seq, { route: { tenant: route.tenant, agent: route.agent }, paid });
  }

  /** Writes what a call or a lease's end held down, then counts it (the alarm again if a ledger could not take it). */
  private async keepHeld(route: Route, held: HeldSpan[]): Promise<void> {
    const rows = held.map((span) => this.keep(`held:${span.id}`, NO_TASK, { route: { tenant: route.tenant, agent: route.agent }, held: span }));
    for (const row of rows) await this.countPaid(row, []);
  }

  /** Writes an entry down under its id (once: a second write of the same id keeps the first) and returns its row. */
  private keep(id: string, task: number, entry: PaidEntry): PaidRow {
    this.table();
    const answer = JSON.stringify(entry);
    this.ctx.storage.sql.exec("INSERT INTO paid (id, task, answer) VALUES (?, ?, ?) ON CONFLICT (id) DO NOTHING", id, task, answer);
    return { id, answer };
  }

  /** Counts a kept answer or span (with busy time, if given) and forgets it once every ledger has it; else it waits for the alarm. */
  private async countPaid(row: PaidRow, busy: HourBusy[]): Promise<void> {
    const entry = JSON.parse(row.answer) as PaidEntry;
    const counted = "held" in entry ? await countHeld(this.env, entry.route, entry.held) : await countJob(this.env, entry.route, busy, this.paidAnswer(entry.route, entry.paid));
    if (counted) this.ctx.storage.sql.exec("DELETE FROM paid WHERE id = ?", row.id);
  }

  /** Paid answers whose task is gone but a ledger did not take them: counted again. */
  private async countLeftovers(): Promise<void> {
    const rows = this.ctx.storage.sql.exec<PaidRow>("SELECT id, answer FROM paid WHERE task NOT IN (SELECT seq FROM tasks)").toArray();
    for (const row of rows) await this.countPaid(row, []);
    if (this.working.size === 0 && this.ctx.storage.sql.exec("SELECT 1 FROM paid LIMIT 1").toArray().length > 0) await this.ctx.storage.setAlarm(Date.now() + REPORT_RETRY_MS);
  }

  /** A paid answer as the ledgers count it (runtime/metering/spend.ts); a model no longer configured is logged, not counted. */
  private paidAnswer(effect: Route, paid: Paid): PaidAnswer | null {
    try {
      return { call: paid.id, choice: modelChoice(this.env, paid.pick), message: paid.message, child: paid.child };
    } catch (err) {
      if (!(err instanceof ConfigError)) throw err;
      console.error(`answer ${paid.id} of ${effect.tenant}/${effect.agent} cannot be counted: ${err.message}`);
      return null;
    }
  }

  /**
   * The spend check, then the call (through its key's gate). A configuration
   * that cannot work is a refusal (retrying cannot help); a spend limit
   * reached too, told as it is; anything unexpected a retry.
   */
  private async callModel(effect: EffectMessage, request: ModelRequest, onText: (text: string, calledAt: number) => void): Promise<GatedCall> {
    try {
      const choice = modelChoice(this.env, request.model);
      const refusal = await spendRefusal(this.env, effect, choice);
      if (refusal) return { call: { kind: "refused", error: refusal, verbatim: true } };
      // A tenant's own key is opened here, from the tenant's store (or the environment where the platform allows).
      const own = choice.kind === "provider" && choice.byok && request.model.secret ? await resolveSecret(this.env, effect.tenant, { name: request.model.secret, setBy: request.model.set_by, what: "the model choice" }) : undefined;
      if (own && "missing" in own) return { call: { kind: "refused", error: `not configured: ${own.missing}` } };
      const messages = await picturesIn(this.env.LARGE_VALUES, effect, choice.settings.images, imageLimits(this.env), request.messages);
      return await callProvider(this.env, choice, { ...request, messages }, { cacheKey: `${effect.tenant}/${effect.agent}`, onText, ...(own ? { key: own.value } : {}) });
    } catch (err) {
      if (err instanceof ConfigError) return { call: { kind: "refused", error: `not configured: ${err.message}` } };
      return { call: { kind: "retry", error: errorText(err) } };
    }
  }

  /** The claim's stream target, where its platform can stream; the object hears of the message once, when it is opened. */
  private replyStream(effect: EffectMessage, target: StreamTarget | undefined): ReplyStream | undefined {
    const outbound = target && outboundFor(this.deps, target.address.platform);
    if (!target || !outbound?.stream) return undefined;
    const streamer = { split: outbound.split, stream: outbound.stream };
    return new ReplyStream(this.env, effect, streamer, target, async (shown) => {
      await agentStub(this.env, effect).progress(effect, effect.id, shown);
    });
  }
}

/** A reported task's key: no effect's id, so a later send of the effect is a task of its own. */
const reportedKey = (effect: EffectMessage) => `${effect.id} (reported)`;

/** The courier of an effect's lane (runtime/effects/effects.ts, courierName, names it). */
export function courierStub(env: Env, effect: Pick<EffectMessage, "tenant" | "agent" | "lane">): DurableObjectStub<Courier> {
  const namespace = countedNamespace(env, "Courier", env.COURIER as DurableObjectNamespace<Courier>);
  return namespace.get(namespace.idFromName(courierName(effect)));
}

const effectMessage = z.object({
  tenant: z.string(),
  agent: z.string(),
  kind: z.enum(["model", "send", "tool", "hold", "mount", "typing", "lease", "audit"]),
  id: z.string(),
  lane: z.string(),
  // A message sent before effects carried their work has no attempt: its first.
  attempt: z.number().int().positive().default(1),
  work: z.unknown().optional(),
});

const DEAD_LETTER_SUFFIX = "-dlq";

/**
 * A courier that has not taken its effect by then is left to the queue's
 * retry (it takes a copy once: the task is keyed by the effect), so one
 * hand-off that never answers cannot hold up the batch's others or, locally,
 * where the queue dispatches one batch at a time, every effect behind it.
 */
const HAND_OFF_TIMEOUT_MS = 10_000;

/**
 * The Worker's queue handler, for the effects a pass could not hand to their
 * couriers itself: each courier is handed its effects, all couriers of a batch
 * at once, and each effect is acked as soon as its courier has it. Nothing here
 * waits for a provider or a platform, so a batch takes milliseconds.
 */
export async function consumeQueue(batch: MessageBatch<unknown>, env: Env): Promise<void> {
  if (batch.queue.endsWith(DEAD_LETTER_SUFFIX)) {
    // The agent's object sends an effect again when its lease runs out, so a dead letter is only worth a log line.
    for (const msg of batch.messages) {
      console.error("an effect could not be handed to its courier", JSON.stringify(msg.body));
      msg.ack();
    }
    return;
  }
  const messages = new Map<EffectMessage, Message<unknown>>();
  for (const msg of batch.messages) {
    const parsed = effectMessage.safeParse(msg.body);
    if (parsed.success) messages.set(parsed.data, msg);
    else {
      console.error("dropping a malformed effect message", parsed.error.message);
      msg.ack();
    }
  }
  // Those a courier did not take, the queue delivers again.
  const { taken, missed } = await toCouriers(countedNamespace(env, "Courier", env.COURIER), [...messages.keys()], HAND_OFF_TIMEOUT_MS);
  taken.forEach((effect) => messages.get(effect)!.ack());
  missed.forEach((effect) => messages.get(effect)!.retry({ delaySeconds: 1 }));
}

// The courier: a small Durable Object per lane (one kind of effect of one
// conversation) that does the waiting the agent's object must never do. The
// queue consumer hands it an effect and is done at once, so one slow provider
// or platform call holds up neither the queue nor any other lane. The courier
// keeps the effect in its own SQLite and works from its alarm, so a crash or a
// deploy mid-call resumes it; it claims the work from the agent's object (which
// starts the lease there), does it once, and reports back. The object decides
// everything else: retries, order, failure.
import { DurableObject } from "cloudflare:workers";
import { z } from "zod";
import { ConfigError, secretNamed } from "../../lib/config.ts";
import { Gateway, type CallScope, type GatewayDeps, type Mount, type SessionState } from "../../plugins/index.ts";
import { type DeliveryResult, type OutboxDelivery, type Route, type StreamTarget, outboundFor, type RuntimeDeps } from "../chat.ts";
import { callProvider, modelChoice, type ModelRequest, type ProviderCall } from "../models/index.ts";
import { sendTimeoutMs, type EffectKind, type EffectMessage } from "../effects/index.ts";
import { type EffectReport, type EffectWork, agentStub } from "../object/index.ts";
import { countBusy, spendRefusal } from "../metering/index.ts";
import { sessionCopy, type ToolReport, type ToolWork, type MountReport, type MountWork } from "../tools/index.ts";
import { ReplyStream } from "./reply-stream.ts";
import { ScriptCaller } from "./script-caller.ts";
import { textOf } from "../store/index.ts";

/**
 * Armed while the courier works: a courier cut short (evicted, the process
 * killed) runs its alarm again after this, and resumes the task it still holds.
 * A live alarm handler is never run twice at once, so a call that simply takes
 * longer is not disturbed.
 */
const WATCHDOG_MS = 5_000;
/** A courier that cannot reach the agent's object tries again after this, doubling. */
const REPORT_RETRY_MS = 2_000;
const MAX_REPORT_RETRY_MS = 60_000;

type Task = { seq: number; body: string; failures: number };

export class Courier extends DurableObject<Env> {
  constructor(
    ctx: DurableObjectState,
    env: Env,
    private readonly deps: RuntimeDeps,
  ) {
    super(ctx, env);
  }

  /** Takes an effect (a second copy of one it holds is ignored) and starts on it. */
  async take(effect: EffectMessage): Promise<void> {
    this.table();
    const inserted = this.ctx.storage.sql.exec(
      "INSERT OR IGNORE INTO tasks (kind, id, body, failures) VALUES (?, ?, ?, 0)",
      effect.kind,
      effect.id,
      JSON.stringify(effect),
    ).rowsWritten;
    // At work already (its watchdog is armed), the running alarm takes the new task in turn.
    if (inserted > 0 && (await this.ctx.storage.getAlarm()) === null) await this.ctx.storage.setAlarm(Date.now());
  }

  override async alarm(): Promise<void> {
    this.table();
    await this.ctx.storage.setAlarm(Date.now() + WATCHDOG_MS);
    const sql = this.ctx.storage.sql;
    for (;;) {
      const task = sql.exec<Task>("SELECT seq, body, failures FROM tasks ORDER BY seq LIMIT 1").toArray()[0];
      if (!task) break;
      try {
        await this.perform(JSON.parse(task.body) as EffectMessage);
      } catch (err) {
        // The agent's object could not be reached: keep the task (and the lane's order) and try again later.
        const wait = Math.min(MAX_REPORT_RETRY_MS, REPORT_RETRY_MS * 2 ** task.failures);
        console.warn(`courier: ${task.body} failed (${err instanceof Error ? err.message : String(err)}); again in ${wait} ms`);
        sql.exec("UPDATE tasks SET failures = failures + 1 WHERE seq = ?", task.seq);
        await this.ctx.storage.setAlarm(Date.now() + wait);
        return;
      }
      sql.exec("DELETE FROM tasks WHERE seq = ?", task.seq);
    }
    // Nothing left: a courier at rest keeps no storage at all.
    await this.ctx.storage.deleteAll();
  }

  private table(): void {
    this.ctx.storage.sql.exec(
      "CREATE TABLE IF NOT EXISTS tasks (seq INTEGER PRIMARY KEY AUTOINCREMENT, kind TEXT NOT NULL, id TEXT NOT NULL, body TEXT NOT NULL, failures INTEGER NOT NULL, UNIQUE (kind, id))",
    );
  }

  private async perform(effect: EffectMessage): Promise<void> {
    switch (effect.kind) {
      case "model": {
        const claim = await this.claim(effect, "model");
        if (!claim) return;
        const stream = this.replyStream(effect, claim.stream);
        // The object's busy time goes to the ledger while the provider works.
        const [, call] = await Promise.all([countBusy(this.env, effect, claim.busy), this.callModel(effect, claim.request, stream)]);
        const shown = await stream?.finish(call.kind === "reply" ? textOf(call.message.content) : undefined);
        return this.report(effect, "model", { call, ...(shown ? { shown } : {}) });
      }
      case "send": {
        const delivery = await this.claim(effect, "send");
        if (!delivery) return;
        return this.report(effect, "send", await this.deliver(delivery));
      }
      case "typing": {
        const address = await this.claim(effect, "typing");
        if (!address) return;
        const typing = outboundFor(this.deps, address.platform)?.typing;
        const result: DeliveryResult = typing
          ? await this.platformCall(() => typing(this.env, address))
          : { ok: false, error: `no typing indicator for platform ${address.platform}` };
        if (!result.ok) console.warn(`typing in ${address.platform} failed: ${result.error}`);
        return this.report(effect, "typing", null);
      }
      case "tool":
      case "hold": {
        const work = await this.claim(effect, effect.kind);
        if (!work) return;
        // A script's own tool calls (code mode) are performed here too, each one handed over by the object.
        const scripts = new ScriptCaller(this.env, effect, (child) => this.runTool(child));
        const report = await this.runTool(work, scripts);
        // The script was stopped because the object could not be reached: try the task again (its re-run gets recorded answers).
        if (scripts.unreachable) throw scripts.unreachable;
        return this.report(effect, effect.kind, report);
      }
      case "mount": {
        const work = await this.claim(effect, "mount");
        if (!work) return;
        return this.report(effect, "mount", await this.fetchTools(effect, work));
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
  private async report<K extends EffectKind>(effect: EffectMessage, kind: K, outcome: EffectReport[K]): Promise<void> {
    await agentStub(this.env, effect).report(effect, kind, effect.id, outcome);
  }

  /**
   * The spend check, then the call (through its key's gate, and counted). A
   * configuration that cannot work is a refusal (retrying cannot help); a
   * spend limit reached too, told as it is; anything unexpected a retry.
   */
  private async callModel(effect: EffectMessage, request: ModelRequest, stream?: ReplyStream): Promise<ProviderCall> {
    try {
      const choice = modelChoice(this.env, request.model);
      const refusal = await spendRefusal(this.env, effect, choice);
      if (refusal) return { kind: "refused", error: refusal, verbatim: true };
      return await callProvider(this.env, effect, effect.id, choice, request, { cacheKey: `${effect.tenant}/${effect.agent}`, onText: stream && ((text) => stream.onText(text)) });
    } catch (err) {
      if (err instanceof ConfigError) return { kind: "refused", error: `not configured: ${err.message}` };
      return { kind: "retry", error: errorText(err) };
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

  /**
   * A chat send, given up after SEND_TIMEOUT_SECONDS. The platform may still
   * have posted it: the object's next claim of the row says so (uncertain),
   * and the bridge looks for the message before posting it again.
   */
  private async deliver(delivery: OutboxDelivery): Promise<DeliveryResult> {
    const outbound = outboundFor(this.deps, delivery.address.platform);
    if (!outbound) return { ok: false, error: `no bridge for platform ${delivery.address.platform}`, permanent: true };
    return this.platformCall(() => outbound.deliver(this.env, delivery));
  }

  /** A call to a chat platform, given up after SEND_TIMEOUT_SECONDS; a missing setting fails for good. */
  private async platformCall(call: () => Promise<DeliveryResult>): Promise<DeliveryResult> {
    try {
      return await withTimeout(call(), sendTimeoutMs(this.env));
    } catch (err) {
      if (err instanceof ConfigError) return { ok: false, error: `not configured: ${err.message}`, permanent: true };
      return { ok: false, error: errorText(err) };
    }
  }

  /** The gateway, here: the mount's secret is resolved and redacted in the courier, never in the object. */
  private async runTool(work: ToolWork, scripts?: ScriptCaller): Promise<ToolReport> {
    const session = sessionCopy(work.session);
    const caller = scripts && ((scope: CallScope) => scripts.forScript(scope.callKey));
    const result = await this.gateway(work.mount, session.state, caller).call(work.tool, work.args, work.scope, { replay: work.replay, approved: work.approved });
    return { result, alias: work.mount.alias, session: session.changed() };
  }

  private async fetchTools(route: Route, work: MountWork): Promise<MountReport> {
    const session = sessionCopy(work.session);
    await this.gateway(work.mount, session.state).fetchTools(work.mount.alias, { tenant: route.tenant, agent: route.agent });
    return { session: session.changed() };
  }

  private gateway(mount: Mount, session: SessionState, caller?: GatewayDeps["caller"]): Gateway {
    return new Gateway([mount], this.deps.plugins, { secret: (name) => secretNamed(this.env, name), session: () => session, caller });
  }
}

/** The timer is cleared once the call answers: a pending one would keep the courier awake for nothing. */
async function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  try {
    return await Promise.race([promise, new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms)))]);
  } finally {
    clearTimeout(timer);
  }
}

function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

export function courierStub(env: Env, effect: EffectMessage): DurableObjectStub<Courier> {
  const namespace = env.COURIER as DurableObjectNamespace<Courier>;
  return namespace.get(namespace.idFromName(`${effect.tenant}:${effect.agent}:${effect.lane}`));
}

const effectMessage = z.object({
  tenant: z.string(),
  agent: z.string(),
  kind: z.enum(["model", "send", "tool", "hold", "mount", "typing"]),
  id: z.string(),
  lane: z.string(),
});

const DEAD_LETTER_SUFFIX = "-dlq";

/**
 * The Worker's queue handler: each effect is handed to its lane's courier, all
 * of a batch's at once, each acked as soon as its courier has it. Nothing here
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
  await Promise.all(
    batch.messages.map(async (msg) => {
      const parsed = effectMessage.safeParse(msg.body);
      if (!parsed.success) {
        console.error("dropping a malformed effect message", parsed.error.message);
        return msg.ack();
      }
      try {
        await courierStub(env, parsed.data).take(parsed.data);
        msg.ack();
      } catch (err) {
        console.warn(`handing ${parsed.data.kind} ${parsed.data.id} to its courier failed; the queue retries it`, err);
        msg.retry({ delaySeconds: 1 });
      }
    }),
  );
}

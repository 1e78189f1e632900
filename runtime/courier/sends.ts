// A courier's chat sends: a conversation's run of rows, each in its turn under
// the platform's rate limits (pace.ts) and given up after SEND_TIMEOUT_SECONDS.
import type { DeliveryResult, OutboxDelivery, RuntimeDeps } from "../chat.ts";
import { ConfigError } from "../../lib/config.ts";
import { withTimeout } from "../../lib/timeout.ts";
import { outboundFor } from "../chat.ts";
import { SEND_LEASE_MS, sendTimeoutMs, type RunResults, type SendRun } from "../effects/index.ts";
import { holdAfter, takeTurn } from "./pace.ts";
import { sleep } from "../../lib/timeout.ts";

/** How long a run of sends may wait for turns under the platforms' rate limits: well inside the send lease. */
const PACE_WAIT_BUDGET_MS = SEND_LEASE_MS / 3;

export class ChatSends {
  constructor(
    private readonly env: Env,
    private readonly deps: RuntimeDeps,
  ) {}

  /**
   * A conversation's rows, in order. An update of a message already posted
   * (not a reply) waits out the platform's spacing since the last one; a message posted
   * earlier in the run gives the later states of it their ref. The run stops
   * at the first row to be tried again (the rows after it wait for it).
   */
  async run(run: SendRun): Promise<RunResults> {
    const refs = new Map<string, string>();
    let lastPacedAt = run.lastPacedAt;
    const results: RunResults = [];
    const paceUntil = Date.now() + PACE_WAIT_BUDGET_MS;
    for (const { row, refKey, ...delivery } of run.deliveries) {
      const ref = delivery.ref ?? (refKey ? refs.get(refKey) : undefined);
      // A reply never waits out the spacing (the outbox's `paced`): it is what the person waits for.
      const update = refKey !== null && ref !== undefined && delivery.message.kind !== "reply";
      if (update && run.spacingMs > 0 && lastPacedAt !== null) await sleep(lastPacedAt + run.spacingMs - Date.now());
      const result = await this.deliver(ref === undefined ? delivery : { ...delivery, ref }, paceUntil);
      results.push({ row, result });
      if (!result.ok && result.permanent !== true) break;
      if (result.ok && refKey !== null) {
        lastPacedAt = Date.now();
        if (result.ref) refs.set(refKey, result.ref);
      }
    }
    return results;
  }

  /**
   * A chat send, given up after SEND_TIMEOUT_SECONDS. The platform may still
   * have posted it: the object's next claim of the row says so (uncertain),
   * and the bridge looks for the message before posting it again. It goes in
   * its turn under the platform's rate limits (pace.ts): a turn that comes
   * after `paceUntil` is not waited for here but handed back as a wait (the
   * object sends the row again then, as after a 429, and counts no attempt).
   */
  private async deliver(delivery: OutboxDelivery, paceUntil: number): Promise<DeliveryResult> {
    const outbound = outboundFor(this.deps, delivery.address.platform);
    if (!outbound) return { ok: false, error: `no bridge for platform ${delivery.address.platform}`, permanent: true };
    const rules = outbound.paceOf?.(delivery) ?? [];
    // A reply goes ahead of other threads' status messages waiting under the same keys: the person waits for it.
    const turn = await takeTurn(this.env, rules, paceUntil, delivery.message.kind === "reply" ? delivery.idempotencyKey : undefined);
    if (!turn.go) return { ok: false, error: `${delivery.address.platform} rate limit: waiting for a turn to send`, retryAfterMs: Math.max(1, turn.at - Date.now()) };
    const sentAt = Date.now();
    const result = await this.platformCall(() => outbound.deliver(this.env, delivery));
    await holdAfter(this.env, rules, sentAt, result);
    return result;
  }

  /** A call to a chat platform, given up after SEND_TIMEOUT_SECONDS; a missing setting fails for good. */
  async platformCall(call: () => Promise<DeliveryResult>): Promise<DeliveryResult> {
    try {
      return await withTimeout(call(), sendTimeoutMs(this.env));
    } catch (err) {
      if (err instanceof ConfigError) return { ok: false, error: `not configured: ${err.message}`, permanent: true };
      return { ok: false, error: errorText(err) };
    }
  }
}

export function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}


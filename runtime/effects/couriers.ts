// Which courier works an effect, and how a due effect reaches it. The pass
// hands each effect straight to its lane's courier: an RPC the courier answers
// once it has written the task down, never once the work is done, so a turn's
// model call leaves without a trip through the queue. The queue carries only
// those a courier did not take in time. Neither carrier is the guarantee: an
// effect sent is leased, and one not reported in time is sent again.
import { withTimeout } from "../../lib/timeout.ts";
import type { EffectMessage } from "./effects.ts";

/** Couriers per agent: lanes hash to one, so an agent's conversations share a few warm objects. */
const COURIER_SHARDS = 8;
/** A courier that has not taken its effects by then is passed over for the queue: the pass waits no longer. */
const HAND_OFF_TIMEOUT_MS = 2_000;

/** What a due effect is handed to: its courier (by name), else the queue. */
export interface EffectCarriers {
  couriers: { idFromName(name: string): DurableObjectId; get(id: DurableObjectId): { take(effects: EffectMessage[]): Promise<void> } };
  queue: Queue<EffectMessage>;
}

/** The courier of an effect's lane: one of its agent's COURIER_SHARDS, by the lane's FNV-1a hash. */
export function courierName(effect: Pick<EffectMessage, "tenant" | "agent" | "lane">): string {
  let hash = 0x811c9dc5;
  for (let i = 0; i < effect.lane.length; i++) hash = Math.imul(hash ^ effect.lane.charCodeAt(i), 0x01000193);
  return `${effect.tenant}:${effect.agent}:courier-${(hash >>> 0) % COURIER_SHARDS}`;
}

/** Effects by courier, each courier's in the order given (a lane's effects keep their order). */
export function byCourier(effects: EffectMessage[]): EffectMessage[][] {
  const groups = new Map<string, EffectMessage[]>();
  for (const effect of effects) {
    const name = courierName(effect);
    groups.set(name, [...(groups.get(name) ?? []), effect]);
  }
  return [...groups.values()];
}

/**
 * Hands each effect to its courier, those a courier did not take to the
 * queue. Returns the effects on their way (all of them, unless the queue
 * refused too: the rest stay due, and the next pass tries again).
 */
export async function handOff(carriers: EffectCarriers, effects: EffectMessage[]): Promise<Set<EffectMessage>> {
  const { couriers, queue } = carriers;
  const away = new Set<EffectMessage>();
  const missed: EffectMessage[] = [];
  await Promise.all(
    byCourier(effects).map(async (group) => {
      try {
        await withTimeout(couriers.get(couriers.idFromName(courierName(group[0]!))).take(group), HAND_OFF_TIMEOUT_MS);
        group.forEach((effect) => away.add(effect));
      } catch (err) {
        console.warn(`${group.length} effects not taken by their courier go on the queue (${err instanceof Error ? err.message : String(err)})`);
        missed.push(...group);
      }
    }),
  );
  if (missed.length === 0) return away;
  try {
    await queue.sendBatch(missed.map((body) => ({ body })));
    missed.forEach((effect) => away.add(effect));
  } catch (err) {
    console.error(`sending ${missed.length} effects failed; the next pass tries again`, err);
  }
  return away;
}

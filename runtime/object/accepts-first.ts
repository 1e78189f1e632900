// Acks first. A platform waits for its webhook's answer (Slack sends an
// event again after 3 s, and turns an app's events off if it keeps failing),
// and the answer waits for the event's way into its object (runtime/edge,
// `submitEvent`): on one isolate every hop of it queues behind the pass steps
// that are ready before it. So once an accept of this isolate has been under
// way for a while (a burst is queueing), a pass, which no answer waits for,
// waits for the accepts: the burst's acks go out first and its turns follow.
// A quick accept is not waited for: the pass would only add its hops to the
// turn. Bounded, so a steady stream of events cannot hold the turns back. Per
// isolate: deployed, the Worker that accepts and the object may be in
// different isolates, and then the object has nothing to wait for.

import { sleep } from "../../lib/timeout.ts";

/** How long an accept may be under way before passes wait for it. */
export const ACK_PATIENCE_MS = 50;
/** The longest a pass waits for the accepts of its isolate. */
export const ACCEPTS_FIRST_MAX_MS = 500;

/** The accepts under way, oldest first (a Set keeps insertion order). */
const underWay = new Set<{ since: number }>();

/** Runs an event's way into its object as an accept that passes wait for. */
export async function accepted<T>(submit: () => Promise<T>): Promise<T> {
  const accept = { since: Date.now() };
  underWay.add(accept);
  try {
    return await submit();
  } finally {
    underWay.delete(accept);
  }
}

/** Whether the oldest accept under way has waited past its patience. */
const queueing = (now: number) => now - (underWay.values().next().value?.since ?? now) >= ACK_PATIENCE_MS;

/**
 * Resolves once no accept has been under way for long in this isolate, or
 * after `ACCEPTS_FIRST_MAX_MS`. Polled rather than signalled: the accept
 * that ends and the pass that waits serve different requests, and workerd
 * does not carry a promise's resolution from one request's context to another.
 */
export async function afterAccepts(maxMs = ACCEPTS_FIRST_MAX_MS): Promise<void> {
  const until = Date.now() + maxMs;
  while (queueing(Date.now()) && Date.now() < until) await sleep(1);
}

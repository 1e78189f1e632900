// The effects' variables, parsed here: how long an effect may wait for a
// courier, how long a chat send may go unanswered, whether replies stream.
import * as z from "zod";
import { booleanVar, parseJsonVar } from "../../lib/config.ts";
import { SEND_LEASE_MS } from "./effects.ts";

/** How long an effect on the queue may wait for a courier before it is sent again (EFFECT_LEASE_SECONDS). */
export function leaseSeconds(env: Env): number {
  return parseJsonVar("EFFECT_LEASE_SECONDS", env.EFFECT_LEASE_SECONDS, z.number().positive().max(3600), "30");
}

/** How long an effect whose leases keep running out is sent again before it is given up (EFFECT_DEADLINE_MINUTES, default 120). */
export function deadlineMs(env: Env): number {
  return parseJsonVar("EFFECT_DEADLINE_MINUTES", env.EFFECT_DEADLINE_MINUTES, z.number().positive().max(7 * 24 * 60), "120") * 60_000;
}

/** Whether replies are streamed to the chat while the model writes them (STREAM_REPLIES, default true). */
export function streamReplies(env: Env): boolean {
  return booleanVar("STREAM_REPLIES", env.STREAM_REPLIES, true);
}

/**
 * How long a platform call (a chat send) may go unanswered before it is given
 * up and retried (SEND_TIMEOUT_SECONDS). At most half the send effect's lease:
 * the claim and the report must fit in it too, or a second courier would send
 * the same row while the first still waits.
 */
export function sendTimeoutMs(env: Env): number {
  const max = SEND_LEASE_MS / 2 / 1000;
  const seconds = parseJsonVar("SEND_TIMEOUT_SECONDS", env.SEND_TIMEOUT_SECONDS, z.number().positive().max(max, `at most ${max} (half the send lease)`), "10");
  return seconds * 1000;
}

// Who may decide a held call, how long a hold waits, and how long a machine
// may sit idle: APPROVERS, APPROVAL_TTL_HOURS and MACHINE_IDLE_MINUTES, parsed here.
import * as z from "zod";
import { approversSchema } from "../../approvals/index.ts";
import { parseJsonVar } from "../../lib/config.ts";
import { ownValue } from "../../lib/own-value.ts";

/** The platform user ids APPROVERS lists for `tenant`. */
export function approversFor(env: Env, tenant: string): string[] {
  return ownValue(parseJsonVar("APPROVERS", env.APPROVERS, approversSchema, "{}"), tenant) ?? [];
}

/** How long a hold waits for a decision (APPROVAL_TTL_HOURS, default 24). */
export function approvalTtlMs(env: Env): number {
  const hours = parseJsonVar("APPROVAL_TTL_HOURS", env.APPROVAL_TTL_HOURS, z.number().positive(), "24");
  return hours * 3_600_000;
}

/** How long a leased mount's machine may sit without a call before it is destroyed (MACHINE_IDLE_MINUTES, default 30). */
export function machineIdleMs(env: Env): number {
  const minutes = parseJsonVar("MACHINE_IDLE_MINUTES", env.MACHINE_IDLE_MINUTES, z.number().positive().max(24 * 60), "30");
  return minutes * 60_000;
}

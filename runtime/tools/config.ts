// Who may decide a held call, and how long a hold waits: APPROVERS and
// APPROVAL_TTL_HOURS, parsed here.
import { z } from "zod";
import { approversSchema } from "../../approvals/index.ts";
import { parseJsonVar } from "../../lib/config.ts";
import { ownValue } from "../../lib/own.ts";

/** The platform user ids APPROVERS lists for `tenant`. */
export function approversFor(env: Env, tenant: string): string[] {
  return ownValue(parseJsonVar("APPROVERS", env.APPROVERS, approversSchema, "{}"), tenant) ?? [];
}

/** How long a hold waits for a decision (APPROVAL_TTL_HOURS, default 24). */
export function approvalTtlMs(env: Env): number {
  const hours = parseJsonVar("APPROVAL_TTL_HOURS", env.APPROVAL_TTL_HOURS, z.number().positive(), "24");
  return hours * 3_600_000;
}

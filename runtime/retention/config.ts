// How long a settled conversation stays in its object: RETENTION_DAYS, parsed here.
import * as z from "zod";
import { parseJsonVar } from "../../lib/config.ts";

/** A settled conversation untouched this long is archived to R2 (RETENTION_DAYS, default 90). */
export function retentionMs(env: Env): number {
  const days = parseJsonVar("RETENTION_DAYS", env.RETENTION_DAYS, z.number().positive().max(36_500), "90");
  return days * 86_400_000;
}

// The console's settings, parsed here.
import * as z from "zod";
import { parseJsonVar } from "../lib/config.ts";

/** How long a console session lasts (CONSOLE_SESSION_HOURS). */
export function sessionHours(env: Env): number {
  return parseJsonVar("CONSOLE_SESSION_HOURS", env.CONSOLE_SESSION_HOURS, z.number().positive().max(24 * 30), "12");
}

// How far a child run may go: DELEGATE_MAX_STEPS (model calls in its turn)
// and DELEGATE_TURN_MINUTES (how long its turn may run), parsed here.
import * as z from "zod";
import { parseJsonVar } from "../../lib/config.ts";

/** Model calls a child's turn may make (DELEGATE_MAX_STEPS, default 20); the next one ends it with what it has. */
export function childMaxSteps(env: Env): number {
  return parseJsonVar("DELEGATE_MAX_STEPS", env.DELEGATE_MAX_STEPS, z.number().int().min(1).max(200), "20");
}

/** How long a child's turn may run (DELEGATE_TURN_MINUTES, default 30) before it is stopped and its parent told. */
export function childTurnMs(env: Env): number {
  return parseJsonVar("DELEGATE_TURN_MINUTES", env.DELEGATE_TURN_MINUTES, z.number().positive().max(24 * 60), "30") * 60_000;
}

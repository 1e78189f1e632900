// The turns room's configuration: the agent's instructions, when the operator
// gives their own (AGENT_SYSTEM_PROMPT), and how far a child run may go
// (DELEGATE_MAX_STEPS, DELEGATE_TURN_MINUTES), parsed here.
import * as z from "zod";
import { parseJsonVar } from "../../lib/config.ts";

/** AGENT_SYSTEM_PROMPT: the agent's instructions in place of the built-in ones; empty → none. */
export function customSystemPrompt(env: Env): string | undefined {
  return env.AGENT_SYSTEM_PROMPT?.trim() ? env.AGENT_SYSTEM_PROMPT : undefined;
}

/** Model calls a child's turn may make (DELEGATE_MAX_STEPS, default 20); the next one ends it with what it has. */
export function childMaxSteps(env: Env): number {
  return parseJsonVar("DELEGATE_MAX_STEPS", env.DELEGATE_MAX_STEPS, z.number().int().min(1).max(200), "20");
}

/** How long a child's turn may run (DELEGATE_TURN_MINUTES, default 30) before it is stopped and its parent told. */
export function childTurnMs(env: Env): number {
  return parseJsonVar("DELEGATE_TURN_MINUTES", env.DELEGATE_TURN_MINUTES, z.number().positive().max(24 * 60), "30") * 60_000;
}

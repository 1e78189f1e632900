// The webhook bridge's settings: every variable and secret it reads from the
// Worker env, parsed here.
import { secretNamed } from "../../lib/config.ts";

export const DEFAULT_AGENT = "assistant";

/** The one secret that signs events both ways (HMAC-SHA256). */
export function webhookSecret(env: Env): string | undefined {
  return secretNamed(env, "WEBHOOK_SECRET");
}

/** The agent an event goes to when it names none (WEBHOOK_AGENT). */
export function defaultAgent(env: Env): string {
  return env.WEBHOOK_AGENT?.trim() || DEFAULT_AGENT;
}

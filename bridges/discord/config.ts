// The Discord bridge's settings: every variable and secret it reads from the
// Worker env, parsed here. Secrets are read by name (they are not part of the
// generated Env type).
import { baseUrlFrom, secretNamed } from "../../lib/config.ts";

const DEFAULT_API_BASE_URL = "https://discord.com/api/v10";
const DEFAULT_AGENT = "assistant";

/** The REST base; tests point it at the loopback fake. The bot token goes there, so never over plain http off this machine. */
export function apiBaseUrl(env: Env): string {
  return baseUrlFrom("DISCORD_API_BASE_URL", env.DISCORD_API_BASE_URL, DEFAULT_API_BASE_URL);
}

/** The one agent this application serves, in every guild (DISCORD_AGENT). */
export function agentName(env: Env): string {
  return env.DISCORD_AGENT?.trim() || DEFAULT_AGENT;
}

export function botToken(env: Env): string | undefined {
  return secretNamed(env, "DISCORD_BOT_TOKEN");
}

/** The application's public key (hex), which verifies interactions. */
export function publicKey(env: Env): string | undefined {
  return secretNamed(env, "DISCORD_PUBLIC_KEY");
}

/** What the gateway connector signs its forwards with. */
export function gatewaySecret(env: Env): string | undefined {
  return secretNamed(env, "DISCORD_GATEWAY_SECRET");
}

export function applicationId(env: Env): string | undefined {
  return secretNamed(env, "DISCORD_APPLICATION_ID");
}

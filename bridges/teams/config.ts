// The Teams bridge's settings, parsed here: the bot's Microsoft App ID (the
// audience of every token the Bot Framework sends us, and the client id we
// ask tokens with), its client secret, where the Bot Framework's OpenID
// metadata and the token endpoint are (tests point both at a loopback fake),
// and the agent. Secrets are read by name (they are not part of the generated Env type).
import * as z from "zod";
import { baseUrlFrom, ConfigError, requiredSecret } from "../../lib/config.ts";

const DEFAULT_OPENID_METADATA_URL = "https://login.botframework.com/v1/.well-known/openidconfiguration";
const DEFAULT_TOKEN_URL = "https://login.microsoftonline.com/botframework.com/oauth2/v2.0/token";
const DEFAULT_AGENT = "assistant";

/** An Entra application (client) id: a GUID. */
const appId = z.guid("TEAMS_APP_ID must be the bot's Microsoft App ID (a GUID)");

export interface TeamsApp {
  id: string;
  password: string;
}

/** The bot's app id (TEAMS_APP_ID); every activity is refused without it. */
export function appIdOf(env: Env): string {
  const parsed = appId.safeParse(env.TEAMS_APP_ID?.trim());
  if (!parsed.success) throw new ConfigError("TEAMS_APP_ID is not set to a GUID: every Teams activity is refused without it");
  return parsed.data;
}

/** The app id and its client secret, for the client-credentials token the Connector takes. */
export function appOf(env: Env): TeamsApp {
  return { id: appIdOf(env), password: requiredSecret(env, "TEAMS_APP_PASSWORD", "the bot cannot ask for a token to reply with") };
}

/** The Bot Framework's OpenID metadata (issuer, jwks_uri) inbound tokens are checked against. */
export function openIdMetadataUrl(env: Env): string {
  return baseUrlFrom("TEAMS_OPENID_METADATA_URL", env.TEAMS_OPENID_METADATA_URL, DEFAULT_OPENID_METADATA_URL);
}

/** Where the bot asks a token for the Connector (client credentials); a single-tenant bot names its tenant here. */
export function tokenUrl(env: Env): string {
  return baseUrlFrom("TEAMS_TOKEN_URL", env.TEAMS_TOKEN_URL, DEFAULT_TOKEN_URL);
}

/** The one agent every Teams conversation goes to (TEAMS_AGENT). */
export function agentName(env: Env): string {
  return env.TEAMS_AGENT?.trim() || DEFAULT_AGENT;
}

// The console's settings, parsed here.
import * as z from "zod";
import { baseUrlFrom, parseJsonVar, secretNamed } from "../lib/config.ts";

/** How long a console session lasts (CONSOLE_SESSION_HOURS). */
export function sessionHours(env: Env): number {
  return parseJsonVar("CONSOLE_SESSION_HOURS", env.CONSOLE_SESSION_HOURS, z.number().positive().max(24 * 30), "12");
}

/** "Sign in with Slack" (OpenID Connect): on when the Slack app's client id and secret are set. */
export function slackSignIn(env: Env): { clientId: string; clientSecret: string; authorizeUrl: string; tokenUrl: string } | null {
  const clientId = env.SLACK_CLIENT_ID?.trim();
  const clientSecret = secretNamed(env, "SLACK_CLIENT_SECRET");
  if (!clientId || !clientSecret) return null;
  const base = baseUrlFrom("SLACK_SIGN_IN_BASE_URL", env.SLACK_SIGN_IN_BASE_URL, "https://slack.com");
  return { clientId, clientSecret, authorizeUrl: `${base}/openid/connect/authorize`, tokenUrl: `${base}/api/openid.connect.token` };
}

/**
 * "Sign in with Discord" (OAuth2): on when the application's id (its OAuth2
 * client id, which the Discord bridge reads too) and DISCORD_CLIENT_SECRET are set.
 */
export function discordSignIn(env: Env): { clientId: string; clientSecret: string; authorizeUrl: string; tokenUrl: string; apiUrl: string } | null {
  const clientId = secretNamed(env, "DISCORD_APPLICATION_ID");
  const clientSecret = secretNamed(env, "DISCORD_CLIENT_SECRET");
  if (!clientId || !clientSecret) return null;
  const base = baseUrlFrom("DISCORD_SIGN_IN_BASE_URL", env.DISCORD_SIGN_IN_BASE_URL, "https://discord.com");
  return { clientId, clientSecret, authorizeUrl: `${base}/oauth2/authorize`, tokenUrl: `${base}/api/oauth2/token`, apiUrl: `${base}/api` };
}

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

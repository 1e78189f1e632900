// The Slack bridge's settings: every variable and secret it reads from the
// Worker env, parsed here. Secrets are read by name (they are not part of the
// generated Env type).
import * as z from "zod";
import { baseUrlFrom, booleanVar, parseJsonVar, requiredSecret, secretNamed } from "../../lib/config.ts";
import { parseRoute, type Route } from "../../runtime/index.ts";

const DEFAULT_API_BASE_URL = "https://slack.com/api";
const DEFAULT_AGENT = "assistant";

/** The Web API base; tests point it at the loopback fake. Bot tokens go there, so never over plain http off this machine. */
export function apiBaseUrl(env: Env): string {
  return baseUrlFrom("SLACK_API_BASE_URL", env.SLACK_API_BASE_URL, DEFAULT_API_BASE_URL);
}

/** The one agent this Slack app serves, in whichever workspace it is installed. */
export function routeFor(env: Env, tenant: string): Route {
  return parseRoute(tenant, env.SLACK_AGENT || DEFAULT_AGENT);
}

export function signingSecret(env: Env): string {
  return requiredSecret(env, "SLACK_SIGNING_SECRET", "it verifies requests from Slack (docs/slack.md)");
}

/** Multi-workspace OAuth is on when the app's client id is configured. */
export function oauthEnabled(env: Env): boolean {
  return (env.SLACK_CLIENT_ID ?? "") !== "";
}

/** The app's OAuth client id; multi-workspace install needs it. */
export function clientId(env: Env): string {
  return env.SLACK_CLIENT_ID ?? "";
}

export function clientSecret(env: Env): string {
  return requiredSecret(env, "SLACK_CLIENT_SECRET", "it exchanges OAuth codes for bot tokens");
}

/** Where Slack sends the installer back (SLACK_OAUTH_REDIRECT_URL), else this Worker's own callback. */
export function oauthRedirectUrl(env: Env, origin: string): string {
  return env.SLACK_OAUTH_REDIRECT_URL || `${origin}/slack/oauth/callback`;
}

export function tokenEncryptionKey(env: Env): string {
  return requiredSecret(env, "SLACK_TOKEN_ENCRYPTION_KEY", "it encrypts the bot tokens of installed workspaces");
}

/** The single workspace's bot token, when the app is not installed through OAuth. */
export function singleBotToken(env: Env): string | null {
  return secretNamed(env, "SLACK_BOT_TOKEN") ?? null;
}

export function socketForwardSecret(env: Env): string {
  return requiredSecret(env, "SLACK_SOCKET_FORWARD_SECRET", "it verifies requests from the Socket Mode connector");
}

/** The deployment's Slack app has the assistant view: its DM threads are assistant threads (SLACK_ASSISTANT). */
export function assistantEnabled(env: Env): boolean {
  return booleanVar("SLACK_ASSISTANT", env.SLACK_ASSISTANT, false);
}

const promptsSchema = z.array(z.object({ title: z.string().min(1).max(75), message: z.string().min(1).max(2000) })).max(4);
type SuggestedPrompt = z.infer<typeof promptsSchema>[number];

const DEFAULT_PROMPTS: SuggestedPrompt[] = [
  { title: "What can you do?", message: "What can you do for me, and which tools do you have?" },
  { title: "Summarise this channel", message: "Summarise the channel I am looking at." },
];

/** SLACK_SUGGESTED_PROMPTS: a JSON array of up to 4 {title, message}; empty → two general ones. */
export function suggestedPrompts(env: Env): SuggestedPrompt[] {
  return env.SLACK_SUGGESTED_PROMPTS?.trim() ? parseJsonVar("SLACK_SUGGESTED_PROMPTS", env.SLACK_SUGGESTED_PROMPTS, promptsSchema, "[]") : DEFAULT_PROMPTS;
}

/** What the agent is for, on its Home tab (SLACK_HOME_DESCRIPTION); empty → the bridge's own sentence. */
export function homeDescription(env: Env): string | undefined {
  return env.SLACK_HOME_DESCRIPTION?.trim() || undefined;
}

/**
 * How long Slack shows an assistant thread's status with no message sent
 * (SLACK_STATUS_EXPIRY_SECONDS, Slack's two minutes): a turn still working
 * sets it again after three quarters of it, so it never fades mid-turn, and a
 * shorter turn makes no such call.
 */
export function statusRenewalMs(env: Env): number {
  const seconds = parseJsonVar("SLACK_STATUS_EXPIRY_SECONDS", env.SLACK_STATUS_EXPIRY_SECONDS, z.number().positive().max(3600), "120");
  return seconds * 750;
}

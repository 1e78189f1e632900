// Multi-workspace install: /slack/install sends the person to Slack's consent
// page; /slack/oauth/callback exchanges the code (oauth.v2.access) and stores
// the workspace's bot token, encrypted. The state parameter is signed and bound
// to the installing browser by a cookie, so a callback cannot be forged or replayed elsewhere.
// The workspace (with its name) is listed in the directory the console navigates.
import type { Context } from "hono";
import { getCookie, setCookie } from "hono/cookie";
import * as z from "zod";
import { hmacHex, HttpError, safeEqual } from "../../lib/http.ts";
import { recordAgent } from "../../runtime/index.ts";
import { clientId, clientSecret, oauthEnabled, oauthRedirectUrl, routeFor } from "./config.ts";
import { saveInstallation } from "./installations.ts";
import { callSlack } from "./web-api.ts";

export const AUTHORIZE_URL = "https://slack.com/oauth/v2/authorize";
/** What the agent needs: read the messages addressed to it, answer, and take its slash command. */
export const BOT_SCOPES = ["app_mentions:read", "channels:history", "groups:history", "im:history", "mpim:history", "chat:write", "commands", "files:read", "assistant:write", "channels:read", "groups:read", "im:read", "mpim:read", "users:read"];
const STATE_COOKIE = "slack_oauth_state";
/** Slack's authorization codes live 10 minutes; so does our state. */
const STATE_TTL_SECONDS = 600;

function redirectUri(c: Context<{ Bindings: Env }>): string {
  return oauthRedirectUrl(c.env, new URL(c.req.url).origin);
}

function mac(env: Env, text: string): Promise<string> {
  return hmacHex(clientSecret(env), `slack-oauth-state:${text}`);
}

function requireOauth(env: Env): string {
  if (!oauthEnabled(env)) throw new HttpError(404, "multi-workspace install is off: set SLACK_CLIENT_ID (docs/slack.md)");
  return clientId(env);
}

export async function install(c: Context<{ Bindings: Env }>): Promise<Response> {
  const clientId = requireOauth(c.env);
  const nonce = crypto.randomUUID();
  const issued = Math.floor(Date.now() / 1000);
  const state = `${issued}.${nonce}.${await mac(c.env, `${issued}.${nonce}`)}`;
  setCookie(c, STATE_COOKIE, nonce, { httpOnly: true, secure: true, sameSite: "Lax", path: "/slack/oauth", maxAge: STATE_TTL_SECONDS });
  const url = new URL(AUTHORIZE_URL);
  url.searchParams.set("client_id", clientId);
  url.searchParams.set("scope", BOT_SCOPES.join(","));
  url.searchParams.set("redirect_uri", redirectUri(c));
  url.searchParams.set("state", state);
  return c.redirect(url.toString(), 302);
}

const accessSchema = z.object({
  access_token: z.string().min(1),
  bot_user_id: z.string().nullish(),
  team: z.object({ id: z.string(), name: z.string().nullish() }).nullish(),
  enterprise: z.object({ id: z.string(), name: z.string().nullish() }).nullish(),
  is_enterprise_install: z.boolean().nullish(),
});

async function checkState(c: Context<{ Bindings: Env }>, state: string): Promise<void> {
  const [issued, nonce, signature] = state.split(".");
  if (!issued || !nonce || !signature || !safeEqual(signature, await mac(c.env, `${issued}.${nonce}`))) throw new HttpError(403, "invalid OAuth state");
  if (Date.now() / 1000 - Number(issued) > STATE_TTL_SECONDS) throw new HttpError(403, "the install link expired; start again at /slack/install");
  if (!safeEqual(getCookie(c, STATE_COOKIE) ?? "", nonce)) throw new HttpError(403, "this install was started in another browser; start again at /slack/install");
}

export async function callback(c: Context<{ Bindings: Env }>): Promise<Response> {
  const clientId = requireOauth(c.env);
  const denied = c.req.query("error");
  if (denied) throw new HttpError(400, `Slack did not authorise the install: ${denied}`);
  const code = c.req.query("code");
  const state = c.req.query("state");
  if (!code || !state) throw new HttpError(400, "missing code or state");
  await checkState(c, state);

  const form = new URLSearchParams({ client_id: clientId, client_secret: clientSecret(c.env), code, redirect_uri: redirectUri(c) });
  const answer = await callSlack(c.env, "oauth.v2.access", null, form);
  if (!answer.ok) throw new HttpError(400, `the code exchange failed: ${answer.error}`);
  const access = accessSchema.safeParse(answer.data);
  if (!access.success) throw new HttpError(400, "oauth.v2.access returned no bot token");
  const { access_token, bot_user_id, team, enterprise, is_enterprise_install } = access.data;
  // Org-wide installs are keyed by the organisation, like the tenant of their events.
  const owner = is_enterprise_install && enterprise ? enterprise : team;
  const tenant = owner?.id;
  if (!tenant) throw new HttpError(400, "oauth.v2.access named no workspace");
  const route = routeFor(c.env, tenant); // the tenant must be a valid name before anything is stored under it
  await saveInstallation(
    c.env,
    { tenant, teamId: team?.id ?? null, enterpriseId: enterprise?.id ?? null, botUserId: bot_user_id ?? null, installedAt: Date.now() },
    access_token,
  );
  await recordAgent(c.env, { ...route, platform: "slack", displayName: owner.name ?? undefined });
  setCookie(c, STATE_COOKIE, "", { path: "/slack/oauth", maxAge: 0 });
  return c.html(`<!doctype html><title>Installed</title><p>antiproton is installed in workspace ${tenant}. You can close this tab.</p>`);
}

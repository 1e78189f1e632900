// People in the console: "Sign in with Slack" (OpenID Connect; Discord's
// OAuth2 is console/discord-sign-in.ts), each person's roles per tenant (kept in each tenant's own object, runtime/access), and
// who the console acts as. The holder of ADMIN_TOKEN is the platform (the
// break-glass); a person is `slack:<team>:<user>` or `discord:<guild>:<user>`,
// the string approval cards use, and acts in events as that Slack or Discord
// user, so APPROVERS judges them as it would a click on a card in the chat.
import { deleteCookie, getSignedCookie, setSignedCookie } from "hono/cookie";
import * as z from "zod";
import { fromBase64Url, toBase64Url } from "../lib/base64.ts";
import { HttpError } from "../lib/http.ts";
import { identitySchema, PLATFORM_TENANT, rememberPerson, rolesHeldBy, type ChatUser, type TenantRole } from "../runtime/index.ts";
import { slackSignIn } from "./config.ts";
import { BASE, cookieKey, cookieOptions, openSession, type Ctx, type Person, type Viewer, type Who } from "./session.ts";

/** The ADMIN_TOKEN's user in events and the audit trail. */
export const CONSOLE_ADMIN: ChatUser = { platform: "console", id: "admin", name: "console:admin" };

export async function viewerOf(env: Env, who: Who): Promise<Viewer> {
  if (who.kind === "bearer" || !who.person) return { kind: "platform" };
  const held = await rolesHeldBy(env, [who.person.identity]);
  const roles = new Map<string, TenantRole>();
  for (const row of held) if (row.role === "admin" || row.role === "member") roles.set(row.tenant, row.role);
  return { kind: "person", person: who.person, platformAdmin: held.some((r) => r.tenant === PLATFORM_TENANT), roles };
}

/** What the viewer is in `tenant`: "platform" sees everything; null sees nothing (a 404). */
export function roleIn(viewer: Viewer, tenant: string): "platform" | TenantRole | null {
  if (viewer.kind === "platform" || viewer.platformAdmin) return "platform";
  return viewer.roles.get(tenant) ?? null;
}

/** Who the viewer is in an event to an agent. */
export function actingUser(viewer: Viewer): ChatUser {
  if (viewer.kind === "platform") return CONSOLE_ADMIN;
  const [platform, team, user] = viewer.person.identity.split(":") as ["slack" | "discord", string, string];
  return { platform, id: user, team, name: viewer.person.identity };
}

export const actorName = (viewer: Viewer) => actingUser(viewer).name!;

// ---- Sign in with Slack ----------------------------------------------------------

const SIGN_IN_COOKIE = "antiproton_console_signin";
const SIGN_IN_SECONDS = 600;
export const SIGN_IN_LOST = "This sign-in was not started here or took too long: start again.";
const CALLBACK = `${BASE}/login/slack/callback`;

const tokenAnswer = z.object({ id_token: z.string().optional(), error: z.string().optional() });
const idClaims = z.object({
  iss: z.literal("https://slack.com"),
  aud: z.string(),
  exp: z.number(),
  nonce: z.string(),
  name: z.string().optional(),
  "https://slack.com/team_id": z.string(),
  "https://slack.com/user_id": z.string(),
});

/** 32 random bytes, base64url (43 characters: also a PKCE code verifier). */
export const random = () => toBase64Url(crypto.getRandomValues(new Uint8Array(32)));

/**
 * Sends the browser to a platform's authorize URL with `query`, keeping
 * `secret` (the state and what proves the answer is this sign-in's) in a signed
 * cookie only the callback at `callback` receives.
 */
export async function sendToSignIn(c: Ctx, callback: string, secret: string, authorizeUrl: string, query: Record<string, string>): Promise<Response> {
  // Lax, not Strict: the browser comes back from the platform, another site, and must bring it.
  await setSignedCookie(c, SIGN_IN_COOKIE, secret, await cookieKey(c.env), { ...cookieOptions(c, SIGN_IN_SECONDS), sameSite: "Lax", path: callback });
  const url = new URL(authorizeUrl);
  for (const [k, v] of Object.entries({ ...query, redirect_uri: callbackUrl(c, callback) })) url.searchParams.set(k, v);
  return c.redirect(url.toString(), 303);
}

/** Where the platform sends the browser back: the same in the authorize request and the code exchange. */
export const callbackUrl = (c: Ctx, callback: string) => `${new URL(c.req.url).origin}${callback}`;

/**
 * The platform's answer at `callback`: its state checked against the one
 * `sendToSignIn` kept (read once: another browser, or too late, has none),
 * its refusal said, and its code exchanged once at `tokenUrl` with `form`,
 * which may use the kept proof (a nonce, a PKCE verifier). Returns that proof
 * and what the token endpoint answered.
 */
export async function redeemSignInCode(
  c: Ctx,
  platform: string,
  callback: string,
  tokenUrl: string,
  form: (proof: string) => Record<string, string>,
): Promise<{ proof: string; ok: boolean; status: number; answer: unknown }> {
  const kept = await getSignedCookie(c, await cookieKey(c.env), SIGN_IN_COOKIE);
  deleteCookie(c, SIGN_IN_COOKIE, { path: callback });
  const [state, proof] = (kept || "").split(".");
  if (!state || !proof || c.req.query("state") !== state) throw new HttpError(400, SIGN_IN_LOST);
  const error = c.req.query("error");
  if (error) throw new HttpError(401, `${platform} did not sign you in (${error.slice(0, 100)}).`);
  const code = c.req.query("code");
  if (!code) throw new HttpError(400, `${platform} sent no code back.`);
  const res = await fetch(tokenUrl, {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded" },
    body: new URLSearchParams({ ...form(proof), code, redirect_uri: callbackUrl(c, callback) }),
    signal: AbortSignal.timeout(10_000),
  });
  return { proof, ok: res.ok, status: res.status, answer: await res.json().catch(() => null) };
}

/** Sends the browser to Slack with a fresh state and nonce, kept in a signed cookie until it comes back. */
export async function startSlackSignIn(c: Ctx): Promise<Response> {
  const config = slackSignIn(c.env);
  if (!config) throw new HttpError(404, "Sign in with Slack is not configured on this deployment");
  const state = random();
  const nonce = random();
  return sendToSignIn(c, CALLBACK, `${state}.${nonce}`, config.authorizeUrl, { response_type: "code", scope: "openid profile", client_id: config.clientId, state, nonce });
}

/** The person Slack signed in: state and nonce checked, the code exchanged once, the id token's claims checked. */
export async function finishSlackSignIn(c: Ctx): Promise<Person> {
  const config = slackSignIn(c.env);
  if (!config) throw new HttpError(404, "Sign in with Slack is not configured on this deployment");
  const redeemed = await redeemSignInCode(c, "Slack", CALLBACK, config.tokenUrl, () => ({ client_id: config.clientId, client_secret: config.clientSecret }));
  const nonce = redeemed.proof;
  const answer = tokenAnswer.safeParse(redeemed.answer);
  const idToken = answer.data?.id_token;
  if (!idToken) throw new HttpError(401, `Slack refused the sign-in (${answer.data?.error ?? redeemed.status}).`);
  // The id token came straight from Slack's token endpoint over TLS: its claims are checked, not its signature (OpenID Connect Core 3.1.3.7).
  const claims = idClaims.safeParse(decodePayload(idToken));
  if (!claims.success) throw new HttpError(401, "Slack's id token is unreadable.");
  const t = claims.data;
  if (t.aud !== config.clientId || t.nonce !== nonce || t.exp * 1000 < Date.now()) throw new HttpError(401, "Slack's id token is not for this sign-in.");
  const identity = identitySchema.safeParse(`slack:${t["https://slack.com/team_id"]}:${t["https://slack.com/user_id"]}`);
  if (!identity.success) throw new HttpError(401, "Slack named an unusable team or user.");
  return { identity: identity.data, name: t.name?.slice(0, 100) || identity.data };
}

function decodePayload(jwt: string): unknown {
  try {
    const part = jwt.split(".")[1] ?? "";
    return JSON.parse(new TextDecoder().decode(fromBase64Url(part)));
  } catch {
    return null;
  }
}

/** A person with no role anywhere gets no session: there is nothing the console could show them. */
export async function signInPerson(c: Ctx, person: Person): Promise<void> {
  const viewer = await viewerOf(c.env, { kind: "session", id: "", person });
  if (viewer.kind === "person" && !viewer.platformAdmin && viewer.roles.size === 0) {
    throw new HttpError(403, `${person.identity} has no role here: ask a tenant admin.`);
  }
  // The name the platform gave at sign-in is the one the console shows for them (console/names.tsx).
  if (person.name !== person.identity) await rememberPerson(c.env, person);
  await openSession(c, person);
}

// "Sign in with Discord": OAuth2's code grant (identify, guilds) with state
// and PKCE kept in a signed cookie. A person is `discord:<guild>:<user>`, as
// on approval cards; someone holding roles in several guilds picks one, so a
// session acts as exactly one identity (docs/console.md).
import { deleteCookie, getSignedCookie, setSignedCookie } from "hono/cookie";
import * as z from "zod";
import { toBase64Url } from "../lib/base64.ts";
import { HttpError } from "../lib/http.ts";
import { identitySchema, rolesHeldBy } from "../runtime/index.ts";
import { discordSignIn } from "./config.ts";
import { random, redeemSignInCode, sendToSignIn, SIGN_IN_LOST } from "./people.ts";
import { BASE, cookieKey, cookieOptions, type Ctx, type Person } from "./session.ts";

const CALLBACK = `${BASE}/login/discord/callback`;
export const DISCORD_PICK = `${BASE}/login/discord/pick`;
const PICK_COOKIE = "antiproton_console_discord_pick";
const PICK_SECONDS = 600;
/** Discord lists at most 200 guilds a page; a person in more is asked about the first 200. */
const GUILDS_ASKED = 200;
/** The choices travel in a cookie (about 4 KB), so a person is offered this many at most. */
const CHOICES_KEPT = 20;

const NOT_CONFIGURED = "Sign in with Discord is not configured on this deployment";
const tokenAnswer = z.object({ access_token: z.string().optional(), error: z.string().optional() });
const userAnswer = z.object({ id: z.string(), username: z.string(), global_name: z.string().nullish() });
const guildsAnswer = z.array(z.object({ id: z.string(), name: z.string() }));

/** A guild the person may sign in as: they hold a role in its tenant (or the platform's). */
export const guildChoice = z.object({ guild: z.string(), guildName: z.string(), person: z.object({ identity: identitySchema, name: z.string() }) });
export type GuildChoice = z.infer<typeof guildChoice>;

async function sha256Base64Url(text: string): Promise<string> {
  return toBase64Url(new Uint8Array(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text))));
}

/** Sends the browser to Discord with a fresh state and PKCE challenge. */
export async function startDiscordSignIn(c: Ctx): Promise<Response> {
  const config = discordSignIn(c.env);
  if (!config) throw new HttpError(404, NOT_CONFIGURED);
  const state = random();
  const verifier = random();
  return sendToSignIn(c, CALLBACK, `${state}.${verifier}`, config.authorizeUrl, {
    response_type: "code",
    scope: "identify guilds",
    client_id: config.clientId,
    state,
    code_challenge: await sha256Base64Url(verifier),
    code_challenge_method: "S256",
  });
}

/** The guilds the person Discord signed in may act in: state checked, the code exchanged once (with the verifier), the user and guilds read with its token. */
export async function finishDiscordSignIn(c: Ctx): Promise<GuildChoice[]> {
  const config = discordSignIn(c.env);
  if (!config) throw new HttpError(404, NOT_CONFIGURED);
  const form = (verifier: string) => ({ grant_type: "authorization_code", client_id: config.clientId, client_secret: config.clientSecret, code_verifier: verifier });
  const redeemed = await redeemSignInCode(c, "Discord", CALLBACK, config.tokenUrl, form);
  const answer = tokenAnswer.safeParse(redeemed.answer);
  const token = answer.data?.access_token;
  if (!redeemed.ok || !token) throw new HttpError(401, `Discord refused the sign-in (${answer.data?.error ?? redeemed.status}).`);
  const [user, guilds] = await Promise.all([readAsUser(config.apiUrl, "/users/@me", token, userAnswer), readAsUser(config.apiUrl, "/users/@me/guilds", token, guildsAnswer)]);
  const name = (user.global_name ?? user.username).slice(0, 100);
  const candidates = guilds.slice(0, GUILDS_ASKED).flatMap((g) => {
    const identity = identitySchema.safeParse(`discord:${g.id}:${user.id}`);
    return identity.success ? [{ guild: g.id, guildName: g.name.slice(0, 100), person: { identity: identity.data, name } }] : [];
  });
  const held = new Set((await rolesHeldBy(c.env, candidates.map((choice) => choice.person.identity))).map((row) => row.identity));
  const choices = candidates.filter((choice) => held.has(choice.person.identity)).slice(0, CHOICES_KEPT);
  if (choices.length === 0) throw new HttpError(403, `${name} (Discord user ${user.id}) has no role here in any of their Discord servers: ask a tenant admin.`);
  return choices;
}

async function readAsUser<T>(apiUrl: string, path: string, token: string, schema: z.ZodType<T>): Promise<T> {
  const res = await fetch(`${apiUrl}${path}`, { headers: { authorization: `Bearer ${token}` }, signal: AbortSignal.timeout(10_000) });
  const parsed = schema.safeParse(await res.json().catch(() => null));
  if (!res.ok || !parsed.success) throw new HttpError(401, `Discord would not tell who you are (${path}: ${res.status}).`);
  return parsed.data;
}

/** Keeps the verified choices for the pick (Strict: the pick is a form on our own page). */
export async function keepChoices(c: Ctx, choices: GuildChoice[]): Promise<void> {
  await setSignedCookie(c, PICK_COOKIE, JSON.stringify(choices), await cookieKey(c.env), { ...cookieOptions(c, PICK_SECONDS), path: DISCORD_PICK });
}

/** The person of the guild picked, among the choices this browser was given. */
export async function pickedPerson(c: Ctx, guild: string): Promise<Person> {
  const kept = await getSignedCookie(c, await cookieKey(c.env), PICK_COOKIE);
  deleteCookie(c, PICK_COOKIE, { path: DISCORD_PICK });
  const choices = z.array(guildChoice).safeParse(JSON.parse(kept || "null"));
  if (!choices.success) throw new HttpError(400, SIGN_IN_LOST);
  const picked = choices.data.find((choice) => choice.guild === guild);
  if (!picked) throw new HttpError(400, `Discord server ${guild.slice(0, 30)} was not one of your choices: start again.`);
  return picked.person;
}

// Who may use the console: the holder of ADMIN_TOKEN. Signing in opens a
// session: a random id in a signed cookie (hono's signed cookies, keyed from
// the token), kept in an object of its own named by the id's hash, with an
// expiry (session-object.ts). Signing out deletes it, so the cookie is
// worthless afterwards; rotating ADMIN_TOKEN changes the cookie key and so
// ends every session. Scripts may send
// `Authorization: Bearer <ADMIN_TOKEN>` instead of a cookie.
//
// Each state-changing form carries a token bound to the session and to the
// form's action, checked on top of hono/csrf's Origin check.
import type { Context } from "hono";
import { deleteCookie, getSignedCookie, setSignedCookie } from "hono/cookie";
import { sessionHours } from "./config.ts";
import type { PostedForm } from "./form.ts";
import { sessionStub } from "./session-object.ts";
import { toBase64Url } from "../lib/base64.ts";
import { bearerToken, hmacHex, isHttpsOrLoopback, safeEqual, sha256Hex } from "../lib/http.ts";
import { adminToken, type TenantRole } from "../runtime/index.ts";

export const BASE = "/console";
export const SESSION_COOKIE = "antiproton_console";
const RESULT_COOKIE = "antiproton_console_result";
/** How long the server's answer to a form waits for the page it redirects to. */
const RESULT_SECONDS = 60;

/** A person signed in through their platform (console/people.ts); a session without one is the ADMIN_TOKEN's. */
export interface Person {
  identity: string;
  name: string;
}

export type Who = { kind: "session"; id: string; person?: Person } | { kind: "bearer" };

/** Who is looking, with what right: the platform (ADMIN_TOKEN), or a person and their roles (console/people.ts). */
export type Viewer = { kind: "platform" } | { kind: "person"; person: Person; platformAdmin: boolean; roles: Map<string, TenantRole> };

export type ConsoleEnv = {
  Bindings: Env;
  Variables: { secureHeadersNonce?: string; who?: Who; viewer?: Viewer; form?: PostedForm };
};
export type Ctx = Context<ConsoleEnv>;

export function cookieKey(env: Env): Promise<string> {
  return hmacHex(adminToken(env), "antiproton-console-cookie");
}

/** The session's object is named by a hash of the id: its name opens no session. */
async function sessionOf(env: Env, id: string) {
  return sessionStub(env, await sha256Hex(id));
}

/** Secure everywhere but plain http on loopback, where `wrangler dev` serves the console. */
function secureCookie(c: Ctx): boolean {
  const url = new URL(c.req.url);
  return !(url.protocol === "http:" && isHttpsOrLoopback(url));
}

export function cookieOptions(c: Ctx, maxAge: number) {
  return { httpOnly: true, secure: secureCookie(c), sameSite: "Strict" as const, path: BASE, maxAge };
}

/** Opens a session: the ADMIN_TOKEN's, or with `person`, a person's. */
export async function openSession(c: Ctx, person?: Person): Promise<void> {
  const id = toBase64Url(crypto.getRandomValues(new Uint8Array(32)));
  const seconds = Math.round(sessionHours(c.env) * 3600);
  await (await sessionOf(c.env, id)).open({ expiresAt: Date.now() + seconds * 1000, ...(person ? { person } : {}) });
  await setSignedCookie(c, SESSION_COOKIE, id, await cookieKey(c.env), cookieOptions(c, seconds));
}

/** True when the request carries `Authorization: Bearer <ADMIN_TOKEN>`. */
export async function bearerHolds(c: Ctx): Promise<boolean> {
  const bearer = bearerToken(c.req.header("authorization"));
  return bearer !== undefined && safeEqual(bearer, adminToken(c.env));
}

/** The live session named by the request's cookie, or a bearer header holding the token; any other Authorization header is no one. */
export async function whoIsAsking(c: Ctx): Promise<Who | null> {
  if (c.req.header("authorization") !== undefined) return (await bearerHolds(c)) ? { kind: "bearer" } : null;
  const id = await getSignedCookie(c, await cookieKey(c.env), SESSION_COOKIE);
  if (!id) return null;
  const stored = await (await sessionOf(c.env, id)).read();
  return stored && { kind: "session", id, person: stored.person };
}

export async function closeSession(c: Ctx): Promise<void> {
  const who = c.get("who");
  if (who?.kind === "session") await (await sessionOf(c.env, who.id)).close();
  deleteCookie(c, SESSION_COOKIE, { path: BASE });
}

/** The token a form posting to `action` carries; empty for a bearer caller, who needs none. */
export async function formToken(c: Ctx, action: string): Promise<string> {
  const who = c.get("who");
  return who?.kind === "session" ? hmacHex(await cookieKey(c.env), `form\n${who.id}\n${action}`) : "";
}

/** True when the posted form carries the token made for this session and this action. */
export async function formTokenValid(c: Ctx, form: URLSearchParams): Promise<boolean> {
  if (c.get("who")?.kind === "bearer") return true;
  const expected = await formToken(c, new URL(c.req.url).pathname);
  return expected !== "" && safeEqual(form.get("_token") ?? "", expected);
}

/** The server's answer to a form, carried (signed) to the page the form redirects to. */
export async function setResult(c: Ctx, text: string): Promise<void> {
  await setSignedCookie(c, RESULT_COOKIE, text.slice(0, 600), await cookieKey(c.env), cookieOptions(c, RESULT_SECONDS));
}

/** The answer waiting for this page, shown once. */
export async function takeResult(c: Ctx): Promise<string | undefined> {
  const text = await getSignedCookie(c, await cookieKey(c.env), RESULT_COOKIE);
  if (text === undefined) return undefined;
  deleteCookie(c, RESULT_COOKIE, { path: BASE });
  return text || undefined;
}

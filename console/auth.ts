// Who may use the console: the holder of ADMIN_TOKEN. A browser cannot send a
// bearer header, so signing in sets a cookie holding an HMAC of the token (never
// the token): it is fixed for a token, so rotating ADMIN_TOKEN signs everyone out.
import type { Context } from "hono";
import { getCookie } from "hono/cookie";
import { HttpError, safeEqual, secretNamed } from "../runtime/index.ts";

export const SESSION_COOKIE = "antiproton_console";
const SESSION_LABEL = "antiproton-console";

export function adminToken(env: Env): string {
  const token = secretNamed(env, "ADMIN_TOKEN");
  if (!token) throw new HttpError(503, "ADMIN_TOKEN is not configured on this deployment");
  return token;
}

export async function sessionValue(token: string): Promise<string> {
  const enc = new TextEncoder();
  const key = await crypto.subtle.importKey("raw", enc.encode(token), { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
  const mac = new Uint8Array(await crypto.subtle.sign("HMAC", key, enc.encode(SESSION_LABEL)));
  return Array.from(mac, (b) => b.toString(16).padStart(2, "0")).join("");
}

/** The session cookie, or an `Authorization: Bearer` header for scripts. */
export async function signedIn(c: Context<{ Bindings: Env }>, token: string): Promise<boolean> {
  const bearer = /^Bearer (.+)$/.exec(c.req.header("authorization") ?? "")?.[1];
  if (bearer !== undefined && safeEqual(bearer, token)) return true;
  const cookie = getCookie(c, SESSION_COOKIE);
  return cookie !== undefined && safeEqual(cookie, await sessionValue(token));
}

// Who may use the console: the holder of ADMIN_TOKEN. A browser cannot send a
// bearer header, so signing in sets a cookie holding an HMAC of the token (never
// the token): it is fixed for a token, so rotating ADMIN_TOKEN signs everyone out.
import type { Context } from "hono";
import { getCookie } from "hono/cookie";
import { hmacHex, safeEqual } from "../lib/http.ts";

export const SESSION_COOKIE = "antiproton_console";
const SESSION_LABEL = "antiproton-console";

export function sessionValue(token: string): Promise<string> {
  return hmacHex(token, SESSION_LABEL);
}

/** The session cookie, or an `Authorization: Bearer` header for scripts. */
export async function signedIn(c: Context<{ Bindings: Env }>, token: string): Promise<boolean> {
  const bearer = /^Bearer (.+)$/.exec(c.req.header("authorization") ?? "")?.[1];
  if (bearer !== undefined && safeEqual(bearer, token)) return true;
  const cookie = getCookie(c, SESSION_COOKIE);
  return cookie !== undefined && safeEqual(cookie, await sessionValue(token));
}

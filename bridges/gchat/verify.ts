// What proves a request came from Google Chat: the bearer JWT in its
// Authorization header, signed RS256 by Chat (issuer
// chat@system.gserviceaccount.com) for this app (audience: the project
// number or the endpoint URL, as the app is configured), with keys from the
// certificate URL (bridges/shared/jwt.ts). Checked before the body is read: a
// missing, forged, expired or foreign token is a 401 and nothing is written.
import type { Context } from "hono";
import * as z from "zod";
import { bearerToken, HttpError, readBody } from "../../lib/http.ts";
import { publishedKey, verifiedToken } from "../shared/jwt.ts";
import { verification, type Verification } from "./config.ts";

/** An event is a few KiB; a message's text is at most 4,096 characters. */
const EVENT_BODY = { contentTypes: ["application/json"], maxBytes: 256 * 1024 };
/** Clock skew allowed on exp, iat and nbf. */
const SKEW_SECONDS = 60;

/** What an add-on's token (issued by accounts.google.com) must also say: whose it is. */
const emailClaims = z.looseObject({ email: z.string().optional(), email_verified: z.boolean().optional() });

/** The token's claims when it holds; otherwise a 401 naming what failed. */
export async function verifiedClaims(token: string, rules: Verification, now = Date.now()): Promise<Record<string, unknown>> {
  const { claims } = await verifiedToken(token, (kid) => publishedKey(rules.certsUrl, kid), { issuer: rules.issuer, audience: rules.audience, skewSeconds: SKEW_SECONDS, signer: "Google Chat" }, now);
  const { email, email_verified } = emailClaims.parse(claims);
  if (rules.email !== undefined && (email !== rules.email || email_verified !== true)) throw new HttpError(401, `the bearer token does not name ${rules.email}`);
  return claims;
}

/** The raw body of a request whose bearer JWT holds; 401 before the body is read otherwise. */
export async function readEvent(c: Context<{ Bindings: Env }>): Promise<string> {
  const rules = verification(c.env);
  const token = bearerToken(c.req.header("authorization"));
  if (!token) throw new HttpError(401, "missing bearer token (Google Chat signs every request)");
  await verifiedClaims(token, rules);
  return readBody(c, EVENT_BODY);
}

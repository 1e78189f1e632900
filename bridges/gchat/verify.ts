// What proves a request came from Google Chat: the bearer JWT in its
// Authorization header, signed RS256 by Chat (issuer
// chat@system.gserviceaccount.com) for this app (audience: the project
// number or the endpoint URL, as the app is configured), with keys from the
// certificate URL. Checked with Web Crypto before the body is read: a
// missing, forged, expired or foreign token is a 401 and nothing is written.
import type { Context } from "hono";
import * as z from "zod";
import { bearerToken, HttpError, readBody } from "../../lib/http.ts";
import { verification, type Verification } from "./config.ts";

/** An event is a few KiB; a message's text is at most 4,096 characters. */
const EVENT_BODY = { contentTypes: ["application/json"], maxBytes: 256 * 1024 };
/** Clock skew allowed on exp, iat and nbf. */
const SKEW_SECONDS = 60;
/** How long fetched keys are kept when the certificate URL names no max-age. */
const KEYS_TTL_MS = 60 * 60 * 1000;

const headerSchema = z.object({ alg: z.literal("RS256"), kid: z.string().min(1) });
const claimsSchema = z.looseObject({
  iss: z.string(),
  aud: z.union([z.string(), z.array(z.string())]),
  exp: z.number(),
  iat: z.number().optional(),
  nbf: z.number().optional(),
  email: z.string().optional(),
  email_verified: z.boolean().optional(),
});
const jwksSchema = z.object({ keys: z.array(z.looseObject({ kid: z.string(), kty: z.literal("RSA"), n: z.string(), e: z.string() })) });

/** A token naming a key the cache lacks fetches the keys again at most this often (forged key ids cost Google nothing). */
const REFETCH_MS = 60_000;

/** Keys per certificate URL, for their max-age, and when they were fetched. */
const keyCache = new Map<string, { keys: Map<string, CryptoKey>; until: number; fetchedAt: number }>();

async function fetchKeys(url: string): Promise<Map<string, CryptoKey>> {
  const res = await fetch(url, { signal: AbortSignal.timeout(5_000) });
  if (!res.ok) throw new HttpError(503, `Google Chat's signing keys could not be fetched (${res.status})`);
  const parsed = jwksSchema.safeParse(await res.json().catch(() => null));
  if (!parsed.success) throw new HttpError(503, "Google Chat's certificate URL did not answer a JWK set");
  const keys = new Map<string, CryptoKey>();
  for (const jwk of parsed.data.keys) {
    keys.set(jwk.kid, await crypto.subtle.importKey("jwk", { kty: "RSA", n: jwk.n, e: jwk.e, alg: "RS256", ext: true }, { name: "RSASSA-PKCS1-v1_5", hash: "SHA-256" }, false, ["verify"]));
  }
  const maxAge = /max-age=(\d+)/.exec(res.headers.get("cache-control") ?? "")?.[1];
  keyCache.set(url, { keys, until: Date.now() + (maxAge ? Number(maxAge) * 1000 : KEYS_TTL_MS), fetchedAt: Date.now() });
  return keys;
}

/** The key named `kid`: from the cache, else fetched (again when Google may have rotated to a key the cache lacks). */
async function keyFor(url: string, kid: string): Promise<CryptoKey | undefined> {
  const cached = keyCache.get(url);
  const fresh = cached !== undefined && cached.until > Date.now();
  if (fresh && (cached.keys.has(kid) || Date.now() - cached.fetchedAt < REFETCH_MS)) return cached.keys.get(kid);
  return (await fetchKeys(url)).get(kid);
}

/** A JWT part's bytes; null for text that is no base64url (atob throws on a length of 4n+1). */
function base64url(part: string): Uint8Array | null {
  try {
    return Uint8Array.from(atob(part.replace(/-/g, "+").replace(/_/g, "/")), (c) => c.charCodeAt(0));
  } catch {
    return null;
  }
}
const decodeJson = (part: string): unknown => {
  const bytes = base64url(part);
  try {
    return bytes && JSON.parse(new TextDecoder().decode(bytes));
  } catch {
    return null;
  }
};

/** The token's claims when it holds; otherwise a 401 naming what failed. */
export async function verifiedClaims(token: string, rules: Verification, now = Date.now()): Promise<z.infer<typeof claimsSchema>> {
  const parts = token.split(".");
  if (parts.length !== 3 || parts.some((p) => !/^[A-Za-z0-9_-]+$/.test(p))) throw new HttpError(401, "the bearer token is not a JWT");
  const header = headerSchema.safeParse(decodeJson(parts[0]!));
  if (!header.success) throw new HttpError(401, "the bearer token is not an RS256 JWT with a key id");
  const key = await keyFor(rules.certsUrl, header.data.kid);
  if (!key) throw new HttpError(401, "the bearer token is signed with a key Google Chat does not publish");
  const signed = new TextEncoder().encode(`${parts[0]}.${parts[1]}`);
  const signature = base64url(parts[2]!);
  if (!signature || !(await crypto.subtle.verify("RSASSA-PKCS1-v1_5", key, signature, signed))) throw new HttpError(401, "the bearer token's signature does not hold");
  const claims = claimsSchema.safeParse(decodeJson(parts[1]!));
  if (!claims.success) throw new HttpError(401, "the bearer token's claims are malformed");
  const { iss, aud, exp, iat, nbf } = claims.data;
  const seconds = now / 1000;
  if (iss !== rules.issuer) throw new HttpError(401, `the bearer token was not issued by ${rules.issuer}`);
  if (!(Array.isArray(aud) ? aud : [aud]).includes(rules.audience)) throw new HttpError(401, "the bearer token is for another audience");
  if (rules.email !== undefined && (claims.data.email !== rules.email || claims.data.email_verified !== true)) throw new HttpError(401, `the bearer token does not name ${rules.email}`);
  if (exp + SKEW_SECONDS < seconds) throw new HttpError(401, "the bearer token has expired");
  if ((iat ?? 0) - SKEW_SECONDS > seconds || (nbf ?? 0) - SKEW_SECONDS > seconds) throw new HttpError(401, "the bearer token is not valid yet");
  return claims.data;
}

/** The raw body of a request whose bearer JWT holds; 401 before the body is read otherwise. */
export async function readEvent(c: Context<{ Bindings: Env }>): Promise<string> {
  const rules = verification(c.env);
  const token = bearerToken(c.req.header("authorization"));
  if (!token) throw new HttpError(401, "missing bearer token (Google Chat signs every request)");
  await verifiedClaims(token, rules);
  return readBody(c, EVENT_BODY);
}

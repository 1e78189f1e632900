// A bearer JWT signed RS256 by a platform with a key it publishes in a JWK
// set (Google Chat's certificate URL, the Bot Framework's jwks_uri): the set
// is fetched and kept per URL (its max-age, else an hour), and fetched again
// at most once a minute for a key id it lacks (keys roll over; a forged id
// costs its sender nothing and must not cost the publisher a fetch each).
// The signature is checked with Web Crypto before any claim is believed;
// then the registered claims (issuer, audience, time). What else a platform's
// token must say (an email, a service URL, a key's endorsements) its bridge
// checks on the claims and the signing key's JWK this answers.
import * as z from "zod";
import { fromBase64Url } from "../../lib/base64.ts";
import { HttpError } from "../../lib/http.ts";

/** How long a JWK set is kept when its answer names no max-age. */
const KEYS_FOR_MS = 60 * 60 * 1000;
/** A key id the kept set lacks fetches the set again at most this often. */
const REFETCH_AFTER_MS = 60 * 1000;
const FETCH_DEADLINE_MS = 10_000;

const jwkSchema = z.looseObject({ kty: z.literal("RSA"), kid: z.string().min(1), n: z.string().min(1), e: z.string().min(1) });
const jwksSchema = z.looseObject({ keys: z.array(z.unknown()) });
const headerSchema = z.looseObject({ alg: z.string(), kid: z.string().min(1) });
const registeredClaims = z.looseObject({
  iss: z.string(),
  aud: z.union([z.string(), z.array(z.string())]),
  exp: z.number(),
  iat: z.number().optional(),
  nbf: z.number().optional(),
});

/** A published signing key: the key, and its JWK's fields (a publisher may add its own, such as the Bot Framework's endorsements). */
export interface SigningKey {
  key: CryptoKey;
  jwk: z.infer<typeof jwkSchema>;
}

interface KeySet {
  keys: Map<string, SigningKey>;
  until: number;
  fetchedAt: number;
}

/** Per JWK set URL: one fetch at a time, shared by whoever asks meanwhile. */
const keySets = new Map<string, Promise<KeySet>>();

async function fetchKeySet(url: string): Promise<KeySet> {
  const res = await fetch(url, { signal: AbortSignal.timeout(FETCH_DEADLINE_MS) });
  if (!res.ok) throw new Error(`${url} answered ${res.status}`);
  const set = jwksSchema.safeParse(await res.json().catch(() => null));
  if (!set.success) throw new Error(`${url} did not answer a JWK set`);
  const keys = new Map<string, SigningKey>();
  for (const raw of set.data.keys) {
    const jwk = jwkSchema.safeParse(raw);
    if (!jwk.success) continue;
    const key = await crypto.subtle.importKey("jwk", { kty: "RSA", n: jwk.data.n, e: jwk.data.e, alg: "RS256", ext: true }, { name: "RSASSA-PKCS1-v1_5", hash: "SHA-256" }, false, ["verify"]);
    keys.set(jwk.data.kid, { key, jwk: jwk.data });
  }
  const maxAge = /max-age=(\d+)/.exec(res.headers.get("cache-control") ?? "")?.[1];
  const now = Date.now();
  return { keys, until: now + (maxAge ? Number(maxAge) * 1000 : KEYS_FOR_MS), fetchedAt: now };
}

/** The key `kid` of the JWK set at `url`: from the kept set, else fetched. Throws when the set cannot be had. */
export async function publishedKey(url: string, kid: string): Promise<SigningKey | undefined> {
  const kept = await keySets.get(url)?.catch(() => undefined);
  const now = Date.now();
  if (kept && kept.until > now && (kept.keys.has(kid) || now - kept.fetchedAt < REFETCH_AFTER_MS)) return kept.keys.get(kid);
  const loading = fetchKeySet(url);
  keySets.set(url, loading);
  loading.catch(() => keySets.delete(url));
  return (await loading).keys.get(kid);
}

/** A JWT part's JSON; null for text that is no base64url JSON (atob throws on a length of 4n+1). */
function decodePart(part: string): unknown {
  try {
    return JSON.parse(new TextDecoder().decode(fromBase64Url(part)));
  } catch {
    return null;
  }
}

/** What a token must say beside its signature: who issued it, for whom, and the clock skew its times are allowed. */
export interface TokenRules {
  issuer: string;
  audience: string;
  skewSeconds: number;
  /** The platform, as a refusal names it. */
  signer: string;
}

/**
 * The token's claims and the key that signed it, once its RS256 signature
 * holds under a key `keyFor` finds and its issuer, audience and times hold;
 * otherwise a 401 saying which did not (a 503 when the keys cannot be had:
 * the platform sends again, and nothing is lost by refusing meanwhile).
 */
export async function verifiedToken(
  token: string,
  keyFor: (kid: string) => Promise<SigningKey | undefined>,
  rules: TokenRules,
  now = Date.now(),
): Promise<{ claims: z.infer<typeof registeredClaims>; signer: SigningKey }> {
  const parts = token.split(".");
  if (parts.length !== 3 || parts.some((p) => !/^[A-Za-z0-9_-]+$/.test(p))) throw new HttpError(401, "the bearer token is not a JWT");
  const header = headerSchema.safeParse(decodePart(parts[0]!));
  if (!header.success) throw new HttpError(401, "the bearer token's header is unreadable");
  if (header.data.alg !== "RS256") throw new HttpError(401, `the bearer token is signed with ${header.data.alg}, not RS256`);
  let signer: SigningKey | undefined;
  try {
    signer = await keyFor(header.data.kid);
  } catch (err) {
    throw new HttpError(503, `${rules.signer}'s signing keys could not be had: ${err instanceof Error ? err.message : String(err)}`);
  }
  if (!signer) throw new HttpError(401, `the bearer token is signed with a key ${rules.signer} does not publish`);
  const signed = new TextEncoder().encode(`${parts[0]}.${parts[1]}`);
  const valid = await Promise.resolve()
    .then(() => crypto.subtle.verify("RSASSA-PKCS1-v1_5", signer.key, fromBase64Url(parts[2]!), signed))
    .catch(() => false);
  if (!valid) throw new HttpError(401, "the bearer token's signature does not hold");
  const claims = registeredClaims.safeParse(decodePart(parts[1]!));
  if (!claims.success) throw new HttpError(401, "the bearer token's claims are malformed");
  const { iss, aud, exp, iat, nbf } = claims.data;
  const seconds = now / 1000;
  if (iss !== rules.issuer) throw new HttpError(401, `the bearer token was not issued by ${rules.signer} (${rules.issuer})`);
  if (!(Array.isArray(aud) ? aud : [aud]).includes(rules.audience)) throw new HttpError(401, "the bearer token is for another audience");
  if (exp + rules.skewSeconds < seconds) throw new HttpError(401, "the bearer token has expired");
  if ((iat ?? 0) - rules.skewSeconds > seconds || (nbf ?? 0) - rules.skewSeconds > seconds) throw new HttpError(401, "the bearer token is not valid yet");
  return { claims: claims.data, signer };
}

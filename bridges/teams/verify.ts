// What proves an activity genuine: the Bot Framework signs a JWT (RS256) for
// every activity it sends, in Authorization: Bearer. It is checked before the
// body is read: the signing key is one the Bot Framework's OpenID metadata
// publishes (its jwks_uri), the issuer the metadata's, the audience our app
// id, and the token unexpired (five minutes' skew either way). Then, with the
// body: the key endorses the activity's channel (msteams), and the token's
// serviceurl claim is the activity's serviceUrl, so replies (which carry our
// own token) go only where the Bot Framework said. Anything else is a 401 and
// nothing is written. The metadata and keys are kept an hour in the isolate;
// a key id not among them fetches them again (keys roll over), at most once a minute.
import type { Context } from "hono";
import * as z from "zod";
import { fromBase64Url } from "../../lib/base64.ts";
import { bearerToken, HttpError, readBody } from "../../lib/http.ts";
import { appIdOf, openIdMetadataUrl } from "./config.ts";

/** An activity is a few KiB; a message's text is at most about 28 KiB. */
const ACTIVITY_BODY = { contentTypes: ["application/json"], maxBytes: 256 * 1024 };
const SKEW_SECONDS = 300;
const KEYS_FOR_MS = 60 * 60 * 1000;
const REFETCH_AFTER_MS = 60 * 1000;

const metadataSchema = z.looseObject({ issuer: z.string().min(1), jwks_uri: z.url() });
const jwkSchema = z.looseObject({ kty: z.literal("RSA"), kid: z.string().min(1), n: z.string().min(1), e: z.string().min(1), endorsements: z.array(z.string()).optional() });
const jwksSchema = z.looseObject({ keys: z.array(z.unknown()) });
const headerSchema = z.looseObject({ alg: z.string(), kid: z.string().min(1) });
const claimsSchema = z.looseObject({
  iss: z.string(),
  aud: z.union([z.string(), z.array(z.string())]),
  exp: z.number(),
  nbf: z.number().optional(),
  serviceurl: z.string().optional(),
});

interface Keys {
  issuer: string;
  keys: Map<string, { key: CryptoKey; endorsements: string[] | undefined }>;
  at: number;
}

/** Per metadata URL (tests and a deployment each have one). */
const cached = new Map<string, Promise<Keys>>();

async function fetchJson(url: string): Promise<unknown> {
  const res = await fetch(url, { signal: AbortSignal.timeout(10_000) });
  if (!res.ok) throw new Error(`${url} answered ${res.status}`);
  return res.json();
}

async function loadKeys(metadataUrl: string): Promise<Keys> {
  const metadata = metadataSchema.parse(await fetchJson(metadataUrl));
  const { keys } = jwksSchema.parse(await fetchJson(metadata.jwks_uri));
  const usable = new Map<string, { key: CryptoKey; endorsements: string[] | undefined }>();
  for (const raw of keys) {
    const jwk = jwkSchema.safeParse(raw);
    if (!jwk.success) continue;
    const key = await crypto.subtle.importKey("jwk", { kty: "RSA", n: jwk.data.n, e: jwk.data.e, alg: "RS256", ext: true }, { name: "RSASSA-PKCS1-v1_5", hash: "SHA-256" }, false, ["verify"]);
    usable.set(jwk.data.kid, { key, endorsements: jwk.data.endorsements });
  }
  return { issuer: metadata.issuer, keys: usable, at: Date.now() };
}

/** The metadata's keys, fetched again when an hour old or (at most once a minute) when `kid` is not among them. */
async function keysFor(metadataUrl: string, kid: string): Promise<Keys> {
  const held = cached.get(metadataUrl);
  const current = held && (await held.catch(() => undefined));
  const age = current ? Date.now() - current.at : Infinity;
  if (current && age < KEYS_FOR_MS && (current.keys.has(kid) || age < REFETCH_AFTER_MS)) return current;
  const loading = loadKeys(metadataUrl);
  cached.set(metadataUrl, loading);
  loading.catch(() => cached.delete(metadataUrl));
  return loading;
}

const decodePart = (part: string): unknown => JSON.parse(new TextDecoder().decode(fromBase64Url(part)));

export interface VerifiedToken {
  serviceUrl: string | undefined;
  endorsements: string[] | undefined;
}

/** The bearer token's claims, once its signature, issuer, audience and time hold; a 401 saying which did not. */
export async function verifyToken(env: Env, authorization: string | undefined, now = Date.now()): Promise<VerifiedToken> {
  const token = bearerToken(authorization);
  if (!token) throw new HttpError(401, "missing Authorization: Bearer token");
  const parts = token.split(".");
  if (parts.length !== 3) throw new HttpError(401, "the token is not a JWT");
  let header: z.infer<typeof headerSchema>;
  let claims: z.infer<typeof claimsSchema>;
  try {
    header = headerSchema.parse(decodePart(parts[0]!));
    claims = claimsSchema.parse(decodePart(parts[1]!));
  } catch {
    throw new HttpError(401, "the token's header or claims are unreadable");
  }
  if (header.alg !== "RS256") throw new HttpError(401, `the token is signed with ${header.alg}, not RS256`);
  let keys: Keys;
  try {
    keys = await keysFor(openIdMetadataUrl(env), header.kid);
  } catch (err) {
    // The Bot Framework retries a delivery it could not make: nothing is lost by refusing while its keys cannot be had.
    throw new HttpError(503, `the Bot Framework's signing keys could not be had: ${err instanceof Error ? err.message : String(err)}`);
  }
  const signer = keys.keys.get(header.kid);
  if (!signer) throw new HttpError(401, "the token is signed by a key the Bot Framework does not publish");
  const signed = new TextEncoder().encode(`${parts[0]}.${parts[1]}`);
  const valid = await Promise.resolve()
    .then(() => crypto.subtle.verify("RSASSA-PKCS1-v1_5", signer.key, fromBase64Url(parts[2]!), signed))
    .catch(() => false);
  if (!valid) throw new HttpError(401, "the token's signature does not hold");
  if (claims.iss !== keys.issuer) throw new HttpError(401, "the token's issuer is not the Bot Framework's");
  const audiences = typeof claims.aud === "string" ? [claims.aud] : claims.aud;
  if (!audiences.includes(appIdOf(env))) throw new HttpError(401, "the token is not for this bot (audience)");
  const seconds = now / 1000;
  if (claims.exp + SKEW_SECONDS < seconds) throw new HttpError(401, "the token has expired");
  if (claims.nbf !== undefined && claims.nbf - SKEW_SECONDS > seconds) throw new HttpError(401, "the token is not valid yet");
  return { serviceUrl: claims.serviceurl, endorsements: signer.endorsements };
}

/** The activity's raw body, once its token holds for it: the key endorses its channel, the token names its serviceUrl. */
export async function readActivity(c: Context<{ Bindings: Env }>): Promise<{ raw: string; check: (activity: { channelId: string; serviceUrl: string }) => void }> {
  const token = await verifyToken(c.env, c.req.header("Authorization"));
  const raw = await readBody(c, ACTIVITY_BODY);
  const check = ({ channelId, serviceUrl }: { channelId: string; serviceUrl: string }) => {
    if (token.endorsements && !token.endorsements.includes(channelId)) throw new HttpError(401, `the signing key does not endorse the channel ${channelId}`);
    if (token.serviceUrl === undefined || normalise(token.serviceUrl) !== normalise(serviceUrl)) throw new HttpError(401, "the token's serviceurl is not the activity's serviceUrl");
  };
  return { raw, check };
}

const normalise = (url: string) => url.replace(/\/+$/, "").toLowerCase();

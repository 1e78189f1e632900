// What proves an activity genuine: the Bot Framework signs a JWT (RS256) for
// every activity it sends, in Authorization: Bearer. It is checked before the
// body is read: the signing key is one the Bot Framework's OpenID metadata
// publishes (its jwks_uri), the issuer the metadata's, the audience our app
// id, and the token unexpired (five minutes' skew either way). Then, with the
// body: the key endorses the activity's channel (msteams), and the token's
// serviceurl claim is the activity's serviceUrl, so replies (which carry our
// own token) go only where the Bot Framework said. Anything else is a 401 and
// nothing is written. The metadata is kept an hour in the isolate, the keys as
// bridges/shared/jwt.ts keeps a published set.
import type { Context } from "hono";
import * as z from "zod";
import { bearerToken, HttpError, readBody } from "../../lib/http.ts";
import { publishedKey, verifiedToken } from "../shared/jwt.ts";
import { appIdOf, openIdMetadataUrl } from "./config.ts";

/** An activity is a few KiB; a message's text is at most about 28 KiB. */
const ACTIVITY_BODY = { contentTypes: ["application/json"], maxBytes: 256 * 1024 };
const SKEW_SECONDS = 300;
/** The OpenID metadata (the issuer, where the keys are) is kept this long. */
const METADATA_FOR_MS = 60 * 60 * 1000;

const metadataSchema = z.looseObject({ issuer: z.string().min(1), jwks_uri: z.url() });
const teamsClaims = z.looseObject({ serviceurl: z.string().optional() });
const teamsKey = z.looseObject({ endorsements: z.array(z.string()).optional() });

/** Per metadata URL (tests and a deployment each have one): one fetch at a time. */
const metadata = new Map<string, Promise<{ issuer: string; jwksUri: string; at: number }>>();

async function metadataOf(url: string): Promise<{ issuer: string; jwksUri: string }> {
  const kept = await metadata.get(url)?.catch(() => undefined);
  if (kept && Date.now() - kept.at < METADATA_FOR_MS) return kept;
  const loading = (async () => {
    const res = await fetch(url, { signal: AbortSignal.timeout(10_000) });
    if (!res.ok) throw new Error(`${url} answered ${res.status}`);
    const { issuer, jwks_uri } = metadataSchema.parse(await res.json());
    return { issuer, jwksUri: jwks_uri, at: Date.now() };
  })();
  metadata.set(url, loading);
  loading.catch(() => metadata.delete(url));
  return loading;
}

export interface VerifiedToken {
  serviceUrl: string | undefined;
  endorsements: string[] | undefined;
}

/** The bearer token's claims, once its signature, issuer, audience and time hold; a 401 saying which did not. */
export async function verifyToken(env: Env, authorization: string | undefined, now = Date.now()): Promise<VerifiedToken> {
  const token = bearerToken(authorization);
  if (!token) throw new HttpError(401, "missing Authorization: Bearer token");
  let published: { issuer: string; jwksUri: string };
  try {
    published = await metadataOf(openIdMetadataUrl(env));
  } catch (err) {
    // The Bot Framework retries a delivery it could not make: nothing is lost by refusing while its keys cannot be had.
    throw new HttpError(503, `the Bot Framework's signing keys could not be had: ${err instanceof Error ? err.message : String(err)}`);
  }
  const rules = { issuer: published.issuer, audience: appIdOf(env), skewSeconds: SKEW_SECONDS, signer: "the Bot Framework" };
  const { claims, signer } = await verifiedToken(token, (kid) => publishedKey(published.jwksUri, kid), rules, now);
  return { serviceUrl: teamsClaims.parse(claims).serviceurl, endorsements: teamsKey.parse(signer.jwk).endorsements };
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

// The Google Chat bridge's settings, parsed here: how a request from Chat is
// verified (the issuer, the audience and the certificate URL of the bearer
// JWT Chat signs), the service account the app posts as (a JSON key, a
// secret read by name), the Chat API's base, the tenant for events that name
// no Workspace customer, and the agent.
import * as z from "zod";
import { baseUrlFrom, ConfigError, httpsOrLoopbackUrl, parseJsonVar, secretNamed } from "../../lib/config.ts";

const DEFAULT_API_BASE_URL = "https://chat.googleapis.com";
const DEFAULT_ISSUER = "chat@system.gserviceaccount.com";
/** Chat's signing keys as a JWK set (the same keys Google also serves as X.509 certificates). */
const DEFAULT_CERTS_URL = "https://www.googleapis.com/service_accounts/v1/jwk/chat@system.gserviceaccount.com";
const DEFAULT_TOKEN_URL = "https://oauth2.googleapis.com/token";
const DEFAULT_TENANT = "gchat";
const DEFAULT_AGENT = "assistant";

/** The JSON key Google Cloud gives for a service account; the fields the JWT grant needs. */
const serviceAccountSchema = z.looseObject({
  client_email: z.string().email(),
  private_key: z.string().includes("-----BEGIN PRIVATE KEY-----", { message: "a PKCS #8 PEM private key" }),
  token_uri: httpsOrLoopbackUrl("token_uri").default(DEFAULT_TOKEN_URL),
});
export type ServiceAccount = z.infer<typeof serviceAccountSchema>;

/** The app's service account (GCHAT_SERVICE_ACCOUNT): every reply is posted as it. */
export function serviceAccount(env: Env): ServiceAccount {
  const raw = secretNamed(env, "GCHAT_SERVICE_ACCOUNT");
  if (!raw) throw new ConfigError("GCHAT_SERVICE_ACCOUNT is not set: the Google Chat app cannot post without its service account key");
  return parseJsonVar("GCHAT_SERVICE_ACCOUNT", raw, serviceAccountSchema, "{}");
}

export interface Verification {
  issuer: string;
  audience: string;
  certsUrl: string;
  /** The token's `email` claim, verified, when the issuer is not Chat's own. */
  email?: string;
}

/**
 * What a request's bearer JWT must say; unset GCHAT_AUDIENCE refuses every
 * request. Only Chat holds chat@system.gserviceaccount.com's keys; any Google
 * account can have accounts.google.com sign a token for any audience, so with
 * another issuer (a Workspace add-on's) the token must also name the add-on's
 * service account, GCHAT_TOKEN_EMAIL.
 */
export function verification(env: Env): Verification {
  const audience = env.GCHAT_AUDIENCE?.trim();
  if (!audience) throw new ConfigError("GCHAT_AUDIENCE is not set: every Google Chat request is refused without it (the project number, or the endpoint URL)");
  const issuer = env.GCHAT_ISSUER?.trim() || DEFAULT_ISSUER;
  const email = env.GCHAT_TOKEN_EMAIL?.trim();
  if (issuer !== DEFAULT_ISSUER && !email) {
    throw new ConfigError(`GCHAT_TOKEN_EMAIL is not set: with GCHAT_ISSUER ${issuer}, any Google account could sign a token for this endpoint; name the Chat add-on's service account`);
  }
  return { issuer, audience, certsUrl: baseUrlFrom("GCHAT_CERTS_URL", env.GCHAT_CERTS_URL, DEFAULT_CERTS_URL), ...(email ? { email } : {}) };
}

/** The Chat API base; tests point it at the loopback fake. */
export const apiBaseUrl = (env: Env): string => baseUrlFrom("GCHAT_API_BASE_URL", env.GCHAT_API_BASE_URL, DEFAULT_API_BASE_URL);

/** The tenant of an event that names no Workspace customer (a personal account's DM). */
export const defaultTenant = (env: Env): string => env.GCHAT_TENANT?.trim() || DEFAULT_TENANT;

/** The one agent the app serves (GCHAT_AGENT). */
export const agentName = (env: Env): string => env.GCHAT_AGENT?.trim() || DEFAULT_AGENT;

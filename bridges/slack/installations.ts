// Bot tokens per workspace. A multi-workspace install stores the workspace's
// token in the control plane, encrypted with AES-GCM under a key derived from
// the SLACK_TOKEN_ENCRYPTION_KEY secret and bound to the tenant it belongs to.
// A single-workspace deployment uses SLACK_BOT_TOKEN for every tenant.
// A workspace that uninstalls the app (or revokes its bot token) keeps only a
// note that it did: its token is deleted, and SLACK_BOT_TOKEN does not serve it
// either, until it installs the app again.
import { fromBase64, toBase64 } from "../../lib/base64.ts";
import { controlPlane } from "../../runtime/index.ts";
import { oauthEnabled, singleBotToken, tokenEncryptionKey } from "./config.ts";

const NAMESPACE = "slack-installations";
const encoder = new TextEncoder();

export interface Installation {
  tenant: string;
  teamId: string | null;
  enterpriseId: string | null;
  botUserId: string | null;
  installedAt: number;
}

interface StoredInstallation extends Installation {
  /** base64 of the 12-byte IV and the AES-GCM ciphertext of the bot token. */
  iv: string;
  token: string;
}

/** What is left of a workspace's installation once it uninstalled the app or revoked its bot token. */
interface Withdrawn {
  tenant: string;
  withdrawnAt: number;
}

const isWithdrawn = (stored: StoredInstallation | Withdrawn): stored is Withdrawn => "withdrawnAt" in stored;

async function tokenKey(env: Env): Promise<CryptoKey> {
  const secret = tokenEncryptionKey(env);
  const material = await crypto.subtle.importKey("raw", encoder.encode(secret), "HKDF", false, ["deriveKey"]);
  return crypto.subtle.deriveKey(
    { name: "HKDF", hash: "SHA-256", salt: new Uint8Array(), info: encoder.encode("antiproton/slack/bot-token") },
    material,
    { name: "AES-GCM", length: 256 },
    false,
    ["encrypt", "decrypt"],
  );
}


export async function saveInstallation(env: Env, installation: Installation, botToken: string): Promise<void> {
  const iv = crypto.getRandomValues(new Uint8Array(12));
  // The tenant is authenticated data: a token copied to another tenant's row does not decrypt.
  const sealed = await crypto.subtle.encrypt(
    { name: "AES-GCM", iv, additionalData: encoder.encode(installation.tenant) },
    await tokenKey(env),
    encoder.encode(botToken),
  );
  const stored: StoredInstallation = { ...installation, iv: toBase64(iv), token: toBase64(new Uint8Array(sealed)) };
  await controlPlane(env).put(NAMESPACE, installation.tenant, stored);
}

async function storedFor(env: Env, tenant: string): Promise<StoredInstallation | Withdrawn | null> {
  return (await controlPlane(env).get(NAMESPACE, tenant)) as StoredInstallation | Withdrawn | null;
}

async function unseal(env: Env, stored: StoredInstallation): Promise<string> {
  const plain = await crypto.subtle.decrypt(
    { name: "AES-GCM", iv: fromBase64(stored.iv), additionalData: encoder.encode(stored.tenant) },
    await tokenKey(env),
    fromBase64(stored.token),
  );
  return new TextDecoder().decode(plain);
}

/**
 * The bot token for a tenant: its installation when OAuth is on, else
 * SLACK_BOT_TOKEN; none for a workspace that uninstalled the app.
 */
export async function botTokenFor(env: Env, tenant: string): Promise<string | null> {
  if (oauthEnabled(env)) {
    const stored = await storedFor(env, tenant);
    if (stored) return isWithdrawn(stored) ? null : unseal(env, stored);
  }
  return singleBotToken(env);
}

/**
 * The workspace uninstalled the app, or revoked the bot token of one of
 * `botUsers` (null: whichever it was): its token is deleted (with OAuth on) and
 * the workspace is served no more until it installs the app again. False when
 * the revoked token was not this installation's.
 */
export async function withdrawInstallation(env: Env, tenant: string, botUsers: string[] | null): Promise<boolean> {
  if (!oauthEnabled(env)) return true; // SLACK_BOT_TOKEN is the operator's to remove
  const stored = await storedFor(env, tenant);
  if (botUsers && stored && !isWithdrawn(stored) && stored.botUserId && !botUsers.includes(stored.botUserId)) return false;
  const withdrawn: Withdrawn = { tenant, withdrawnAt: Date.now() };
  await controlPlane(env).put(NAMESPACE, tenant, withdrawn);
  return true;
}

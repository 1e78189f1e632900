// Bot tokens per workspace. A multi-workspace install stores the workspace's
// token in the control plane, encrypted with AES-GCM under a key derived from
// the SLACK_TOKEN_ENCRYPTION_KEY secret and bound to the tenant it belongs to.
// A single-workspace deployment uses SLACK_BOT_TOKEN for every tenant.
import { secretNamed } from "../../lib/config.ts";
import { controlPlane } from "../../runtime/index.ts";
import { oauthEnabled, requiredSecret } from "./config.ts";

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

async function tokenKey(env: Env): Promise<CryptoKey> {
  const secret = requiredSecret(env, "SLACK_TOKEN_ENCRYPTION_KEY", "it encrypts the bot tokens of installed workspaces");
  const material = await crypto.subtle.importKey("raw", encoder.encode(secret), "HKDF", false, ["deriveKey"]);
  return crypto.subtle.deriveKey(
    { name: "HKDF", hash: "SHA-256", salt: new Uint8Array(), info: encoder.encode("antiproton/slack/bot-token") },
    material,
    { name: "AES-GCM", length: 256 },
    false,
    ["encrypt", "decrypt"],
  );
}

const toBase64 = (bytes: Uint8Array) => btoa(String.fromCharCode(...bytes));
const fromBase64 = (text: string) => Uint8Array.from(atob(text), (ch) => ch.charCodeAt(0));

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

async function installedToken(env: Env, tenant: string): Promise<string | null> {
  const stored = (await controlPlane(env).get(NAMESPACE, tenant)) as StoredInstallation | null;
  if (!stored) return null;
  const plain = await crypto.subtle.decrypt(
    { name: "AES-GCM", iv: fromBase64(stored.iv), additionalData: encoder.encode(tenant) },
    await tokenKey(env),
    fromBase64(stored.token),
  );
  return new TextDecoder().decode(plain);
}

/** The bot token for a tenant: its installation when OAuth is on, else SLACK_BOT_TOKEN. */
export async function botTokenFor(env: Env, tenant: string): Promise<string | null> {
  if (oauthEnabled(env)) {
    const installed = await installedToken(env, tenant);
    if (installed) return installed;
  }
  return secretNamed(env, "SLACK_BOT_TOKEN") ?? null;
}

// Bot tokens per workspace. A multi-workspace install stores the workspace's
// token in the workspace's own tenant object (a record of kind
// "slack-installations", runtime/control/tenant.ts), encrypted with AES-GCM
// under a key derived from the SLACK_TOKEN_ENCRYPTION_KEY secret and bound to
// the tenant it belongs to; no deployment-wide object holds it or is asked for
// it on an event's way. A single-workspace deployment uses SLACK_BOT_TOKEN for
// every tenant. A workspace that uninstalls the app (or revokes its bot token)
// keeps only a note that it did: its token is deleted, and SLACK_BOT_TOKEN does
// not serve it either, until it installs the app again. The token is read
// afresh for each request (no copy kept), so a withdrawal counts at the next.
import * as z from "zod";
import { open, seal } from "../../lib/sealed.ts";
import { putTenantRecord, tenantRecord } from "../../runtime/index.ts";
import { oauthEnabled, singleBotToken, tokenEncryptionKey } from "./config.ts";

/** The kind of the tenant's record (and the control plane's namespace a release before kept it under). */
const INSTALLATIONS = "slack-installations";

export interface Installation {
  tenant: string;
  teamId: string | null;
  enterpriseId: string | null;
  botUserId: string | null;
  installedAt: number;
}

const storedInstallation = z.object({
  tenant: z.string(),
  teamId: z.string().nullable(),
  enterpriseId: z.string().nullable(),
  botUserId: z.string().nullable(),
  installedAt: z.number(),
  /** base64 of the 12-byte IV and the AES-GCM ciphertext of the bot token. */
  iv: z.string(),
  token: z.string(),
});
type StoredInstallation = z.infer<typeof storedInstallation>;

/** What is left of a workspace's installation once it uninstalled the app or revoked its bot token. */
const withdrawn = z.object({ tenant: z.string(), withdrawnAt: z.number() });
type Withdrawn = z.infer<typeof withdrawn>;

const storedRecord = z.union([withdrawn, storedInstallation]);

const isWithdrawn = (stored: StoredInstallation | Withdrawn): stored is Withdrawn => "withdrawnAt" in stored;

/** What the bot token is sealed for (lib/sealed.ts): the HKDF purpose. */
const PURPOSE = "antiproton/slack/bot-token";

export async function saveInstallation(env: Env, installation: Installation, botToken: string): Promise<void> {
  // The tenant is authenticated data: a token copied to another tenant's row does not decrypt.
  const { iv, sealed } = await seal(tokenEncryptionKey(env), PURPOSE, installation.tenant, botToken);
  const stored: StoredInstallation = { ...installation, iv, token: sealed };
  await putTenantRecord(env, installation.tenant, INSTALLATIONS, stored);
}

async function storedFor(env: Env, tenant: string): Promise<StoredInstallation | Withdrawn | null> {
  const parsed = storedRecord.safeParse(await tenantRecord(env, tenant, INSTALLATIONS));
  return parsed.success ? parsed.data : null;
}

function unseal(env: Env, stored: StoredInstallation): Promise<string> {
  return open(tokenEncryptionKey(env), PURPOSE, stored.tenant, { iv: stored.iv, sealed: stored.token });
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
  const note: Withdrawn = { tenant, withdrawnAt: Date.now() };
  await putTenantRecord(env, tenant, INSTALLATIONS, note);
  return true;
}

// Each webhook tenant's own secret, rotatable with an overlap: the tenant's
// own object keeps only a random nonce per generation (a record of kind
// "webhook-secrets", runtime/control/tenant.ts), and the secret is derived
// from it under WEBHOOK_TENANT_SECRETS_KEY, so a copy of the object's rows
// signs nothing. During a rotation the previous generation still verifies
// until it is retired (at the end of the overlap, or at once when asked); a
// tenant without its own secret uses the platform's shared one, while it is
// switched on. Our callbacks are signed with the tenant's current secret.
import * as z from "zod";
import { toBase64Url } from "../../lib/base64.ts";
import { hmacHex } from "../../lib/http.ts";
import { putTenantRecord, tenantRecord } from "../../runtime/index.ts";
import { sharedWebhookSecret, tenantSecretsKey } from "./config.ts";

/** The kind of the tenant's record (and the control plane's namespace a release before kept it under). */
const SECRETS = "webhook-secrets";
const HOUR_MS = 3_600_000;

const generation = z.object({ nonce: z.string(), createdAt: z.number() });
const storedSecrets = z.object({ current: generation, previous: generation.extend({ retiresAt: z.number() }).nullable() });
type StoredSecrets = z.infer<typeof storedSecrets>;

/** POST /v1/webhook/tenants/{t}/secret: how long the secret it replaces keeps verifying (hours, default 24, at most 30 days). */
export const rotationBody = z.object({ overlap_hours: z.number().min(0).max(720).default(24) }).strict();

async function stored(env: Env, tenant: string): Promise<StoredSecrets | null> {
  const parsed = storedSecrets.safeParse(await tenantRecord(env, tenant, SECRETS));
  return parsed.success ? parsed.data : null;
}

function derive(env: Env, tenant: string, nonce: string): Promise<string> {
  return hmacHex(tenantSecretsKey(env), `antiproton/webhook/${tenant}/${nonce}`);
}

/** The secrets an event for `tenant` may be signed with now: its own (current, and previous until retired), else the shared one. */
export async function verifyingSecrets(env: Env, tenant: string): Promise<string[]> {
  const own = await stored(env, tenant);
  if (!own) {
    const shared = sharedWebhookSecret(env);
    return shared ? [shared] : [];
  }
  const live = own.previous && own.previous.retiresAt > Date.now() ? [own.current, own.previous] : [own.current];
  return Promise.all(live.map((g) => derive(env, tenant, g.nonce)));
}

/** The secret our callbacks to `tenant` are signed with. */
export async function signingSecret(env: Env, tenant: string): Promise<string | undefined> {
  const own = await stored(env, tenant);
  return own ? derive(env, tenant, own.current.nonce) : sharedWebhookSecret(env);
}

/** What may be shown of a tenant's secrets: when each was made and when the previous one stops verifying; never a secret. */
function secretState(own: StoredSecrets | null) {
  const iso = (ms: number) => new Date(ms).toISOString();
  return {
    own: own !== null,
    created_at: own ? iso(own.current.createdAt) : null,
    previous_retires_at: own?.previous && own.previous.retiresAt > Date.now() ? iso(own.previous.retiresAt) : null,
  };
}

/** A new current secret (shown to the caller once); the one it replaces verifies for `overlapHours` more. */
export async function rotateSecret(env: Env, tenant: string, overlapHours: number): Promise<{ secret: string; before: ReturnType<typeof secretState>; after: ReturnType<typeof secretState> }> {
  const now = Date.now();
  const own = await stored(env, tenant);
  const next: StoredSecrets = {
    current: { nonce: toBase64Url(crypto.getRandomValues(new Uint8Array(24))), createdAt: now },
    previous: own ? { ...own.current, retiresAt: now + overlapHours * HOUR_MS } : null,
  };
  const secret = await derive(env, tenant, next.current.nonce);
  await putTenantRecord(env, tenant, SECRETS, next);
  return { secret, before: secretState(own), after: secretState(next) };
}

/** Ends the overlap now: only the current secret verifies. False when there was no previous one still verifying. */
export async function retirePrevious(env: Env, tenant: string): Promise<{ before: ReturnType<typeof secretState>; after: ReturnType<typeof secretState> } | null> {
  const own = await stored(env, tenant);
  if (!own?.previous || own.previous.retiresAt <= Date.now()) return null;
  const next: StoredSecrets = { current: own.current, previous: null };
  await putTenantRecord(env, tenant, SECRETS, next);
  return { before: secretState(own), after: secretState(next) };
}

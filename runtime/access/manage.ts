// Managing a tenant's keys, roles and secrets: the calls /v1 (routes.ts) and
// the console make alike, each change written to the tenant's audit trail
// (a role in the same transaction of the tenant's object as the change; a key
// or a secret right after it, never with its value). Who may
// call them is the caller's policy (requireTenantAdmin here, the console's roles there).
import * as z from "zod";
import { HttpError } from "../../lib/http.ts";
import { deleteTenantSecret, keepTenantKey, keepTenantRole, revokeTenantKeyRow, setTenantSecret, type KeyRow, type SecretListing } from "../control/index.ts";
import { recordChange } from "./audit.ts";
import { mintKey } from "./keys.ts";
import type { newKeyBody, TenantRole } from "./schemas.ts";

/**
 * A new key of the tenant, with its secret `key`: the only time it exists
 * outside the caller's hands is this answer. `request`: an id the caller's
 * retry repeats (a console form's), so a retry makes no second key (409).
 */
export async function createTenantKey(env: Env, tenant: string, spec: z.output<typeof newKeyBody>, actor: string, request?: string): Promise<KeyRow & { key: string }> {
  const { id, key, hash } = await mintKey(tenant, request === undefined ? undefined : `${tenant}\n${request}`);
  const row = await keepTenantKey(env, tenant, { id, hash, name: spec.name, access: spec.access, agent: spec.agent ?? null, createdBy: actor });
  if (!row) throw new HttpError(409, `This form was already sent: key ${id} was made then, and shown only on the page that answered it. Revoke it if it was not kept.`);
  await recordChange(env, { tenant, actor, action: "key.create", subject: id, before: null, after: row });
  return { ...row, key };
}

/** Revokes a live key of the tenant; 404 when it has none by that id. */
export async function revokeTenantKey(env: Env, tenant: string, keyId: string, actor: string): Promise<KeyRow> {
  const row = await revokeTenantKeyRow(env, tenant, keyId);
  if (!row) throw new HttpError(404, `no live key "${keyId}"`);
  await recordChange(env, { tenant, actor, action: "key.revoke", subject: keyId, before: null, after: row });
  return row;
}

/** Gives (or with null, takes away) a person's role; taking away a role they do not hold is a 404. */
export async function setTenantRole(env: Env, tenant: string, identity: string, role: TenantRole | null, actor: string): Promise<{ before: string | null }> {
  const { before } = await keepTenantRole(env, tenant, identity, role, actor).catch((err: unknown) => {
    // The role and its row are one transaction: neither was written.
    console.error("roles: a change could not be saved", tenant, err);
    throw new HttpError(503, "the role could not be saved with its audit row; nothing changed, repeat the request");
  });
  if (role === null && before === null) throw new HttpError(404, `${identity} has no role here`);
  return { before };
}

/** Sets a tenant's secret by value (write-only: answered with its name and dates); the trail names it, never its value. */
export async function setSecret(env: Env, tenant: string, name: string, value: string, actor: string): Promise<SecretListing> {
  const listing = await setTenantSecret(env, tenant, name, value, actor);
  await recordChange(env, { tenant, actor, action: "secret.set", subject: `secrets/${name}`, before: null, after: { updatedAt: new Date(listing.updatedAt).toISOString() } });
  return listing;
}

/** Deletes a tenant's secret; 404 when it has none by that name. */
export async function deleteSecret(env: Env, tenant: string, name: string, actor: string): Promise<void> {
  if (!(await deleteTenantSecret(env, tenant, name))) throw new HttpError(404, `tenant ${tenant} has no secret named ${name}`);
  await recordChange(env, { tenant, actor, action: "secret.delete", subject: `secrets/${name}`, before: null, after: null });
}

// Where a webhook tenant's replies go: the callback_url registered for it
// (PUT /v1/webhook/tenants/{tenant}), kept in the tenant's own object (a
// record of kind "webhook-callbacks", runtime/control/tenant.ts) and read
// from there for each send.
import * as z from "zod";
import { httpsOrLoopbackUrl } from "../../lib/config.ts";
import { deleteTenantRecord, putTenantRecord, tenantRecord } from "../../runtime/index.ts";

/** The kind of the tenant's record (and the control plane's namespace a release before kept it under). */
const CALLBACKS = "webhook-callbacks";

export interface CallbackRegistration {
  callback_url: string;
}

export const registrationSchema = z.object({
  callback_url: httpsOrLoopbackUrl("callback_url"),
});

export async function callbackFor(env: Env, tenant: string): Promise<CallbackRegistration | null> {
  const parsed = registrationSchema.safeParse(await tenantRecord(env, tenant, CALLBACKS));
  return parsed.success ? parsed.data : null;
}

export function registerCallback(env: Env, tenant: string, registration: CallbackRegistration): Promise<void> {
  return putTenantRecord(env, tenant, CALLBACKS, registration);
}

export function unregisterCallback(env: Env, tenant: string): Promise<boolean> {
  return deleteTenantRecord(env, tenant, CALLBACKS);
}

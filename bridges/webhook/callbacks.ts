// Where a webhook tenant's replies go: the callback_url registered for it in
// the control plane (PUT /v1/webhook/tenants/{tenant}).
import * as z from "zod";
import { httpsOrLoopbackUrl } from "../../lib/config.ts";
import { controlPlane } from "../../runtime/index.ts";

const NAMESPACE = "webhook-callbacks";

export interface CallbackRegistration {
  callback_url: string;
}

export const registrationSchema = z.object({
  callback_url: httpsOrLoopbackUrl("callback_url"),
});

export async function callbackFor(env: Env, tenant: string): Promise<CallbackRegistration | null> {
  // Only registrationSchema-checked values are stored under this namespace.
  return (await controlPlane(env).get(NAMESPACE, tenant)) as CallbackRegistration | null;
}

export function registerCallback(env: Env, tenant: string, registration: CallbackRegistration): Promise<void> {
  return controlPlane(env).put(NAMESPACE, tenant, registration);
}

export function unregisterCallback(env: Env, tenant: string): Promise<boolean> {
  return controlPlane(env).delete(NAMESPACE, tenant);
}

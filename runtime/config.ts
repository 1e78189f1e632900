// Every configuration variable is parsed here, never trusted. A bad value is
// reported with the variable's name so the operator knows what to fix.
import { z } from "zod";
import { approversSchema } from "../approvals/index.ts";
import { mountSchema, type Mount } from "../plugins/index.ts";
import { controlPlane } from "./control-plane.ts";
import { ConfigError, parseJsonVar, secretNamed } from "../lib/config.ts";
import { HttpError } from "../lib/http.ts";
import { chooseModel, providerSchema, type ModelChoice } from "./models/index.ts";

const providerList = z.array(providerSchema).refine((list) => new Set(list.map((p) => p.id)).size === list.length, "provider ids must be unique");

/** `HARNESS_MODEL` = `<provider>/<model>`; no provider configured → the built-in local model. */
export function modelChoice(env: Env): ModelChoice {
  const providers = parseJsonVar("MODEL_PROVIDERS", env.MODEL_PROVIDERS, providerList, "[]");
  const harness = (env.HARNESS_MODEL ?? "").trim();
  if (harness === "" && providers.length > 0) throw new ConfigError("MODEL_PROVIDERS is set but HARNESS_MODEL is empty: set it to <provider>/<model>");
  return chooseModel(providers, harness === "" ? "local" : harness, "HARNESS_MODEL");
}

export function retryBaseSeconds(env: Env): number {
  const n = Number(env.MODEL_RETRY_BASE_SECONDS ?? "2");
  return Number.isFinite(n) && n >= 0 ? n : 2;
}



export const mountList = z.array(mountSchema);

/** `MOUNTS`, then the tenant's overrides, then the agent's: a later mount with the same alias replaces an earlier one. */
export async function effectiveMounts(env: Env, route: { tenant: string; agent: string }): Promise<Mount[]> {
  const control = controlPlane(env);
  const [tenant, agent] = await Promise.all([control.get(MOUNTS_NAMESPACE, route.tenant), control.get(MOUNTS_NAMESPACE, `${route.tenant}/${route.agent}`)]);
  const byAlias = new Map<string, Mount>();
  const overrides = [tenant ?? [], agent ?? []].map((list) => {
    const parsed = mountList.safeParse(list);
    if (!parsed.success) throw new ConfigError(`stored mount overrides are invalid: ${z.prettifyError(parsed.error)}`);
    return parsed.data;
  });
  for (const list of [parseJsonVar("MOUNTS", env.MOUNTS, mountList, "[]"), ...overrides]) {
    for (const mount of list) byAlias.set(mount.alias, mount);
  }
  return [...byAlias.values()];
}

export const MOUNTS_NAMESPACE = "mounts";

export function approversFor(env: Env, tenant: string): string[] {
  return parseJsonVar("APPROVERS", env.APPROVERS, approversSchema, "{}")[tenant] ?? [];
}

export function approvalTtlMs(env: Env): number {
  const hours = parseJsonVar("APPROVAL_TTL_HOURS", env.APPROVAL_TTL_HOURS, z.number().positive(), "24");
  return hours * 3_600_000;
}

/** The token guarding /v1 and the console; a deployment without one refuses rather than opens. */
export function adminToken(env: Env): string {
  const token = secretNamed(env, "ADMIN_TOKEN");
  if (!token) throw new HttpError(503, "ADMIN_TOKEN is not configured on this deployment");
  return token;
}

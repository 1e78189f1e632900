// Every configuration variable is parsed here, never trusted. A bad value is
// reported with the variable's name so the operator knows what to fix.
import { z } from "zod";
import { approversSchema } from "../approvals/index.ts";
import { mountSchema, type Mount } from "../plugins/index.ts";
import { controlPlane } from "./control-plane.ts";
import { ConfigError, httpsOrLoopbackUrl, parseJsonVar, secretNamed } from "../lib/config.ts";
import { HttpError } from "../lib/http.ts";
import { ownValue } from "../lib/own.ts";

const providerSchema = z.object({
  id: z.string().regex(/^[A-Za-z0-9._-]+$/, "provider id: letters, digits, . _ -"),
  baseUrl: httpsOrLoopbackUrl("baseUrl"),
  auth: z
    .object({
      /** The NAME of the Worker secret holding the key, never the key itself. */
      secret: z.string().regex(/^[A-Z][A-Z0-9_]*$/, "auth.secret names a Worker secret (UPPER_SNAKE_CASE)"),
      header: z.string().default("Authorization"),
    })
    .optional(),
  contextWindow: z.number().int().positive().default(128_000),
  maxTokens: z.number().int().positive().default(4096),
  /** USD per million tokens, for usage reports. */
  cost: z
    .object({ input: z.number(), output: z.number(), cacheRead: z.number().default(0), cacheWrite: z.number().default(0) })
    .default({ input: 0, output: 0, cacheRead: 0, cacheWrite: 0 }),
});
export type ProviderConfig = z.infer<typeof providerSchema>;


export type ModelChoice =
  | { kind: "local" }
  | { kind: "provider"; provider: ProviderConfig; model: string };

/** `HARNESS_MODEL` = `<provider>/<model>`; no provider configured → the built-in local model. */
export function modelChoice(env: Env): ModelChoice {
  const providers = parseJsonVar("MODEL_PROVIDERS", env.MODEL_PROVIDERS, z.array(providerSchema), "[]");
  const harness = (env.HARNESS_MODEL ?? "").trim();
  if (harness === "" || harness === "local") {
    if (providers.length > 0 && harness === "") throw new ConfigError("MODEL_PROVIDERS is set but HARNESS_MODEL is empty: set it to <provider>/<model>");
    return { kind: "local" };
  }
  const slash = harness.indexOf("/");
  if (slash <= 0 || slash === harness.length - 1) throw new ConfigError("HARNESS_MODEL must be <provider>/<model>");
  const id = harness.slice(0, slash);
  const provider = providers.find((p) => p.id === id);
  if (!provider) throw new ConfigError(`HARNESS_MODEL names provider "${id}", which is not in MODEL_PROVIDERS`);
  return { kind: "provider", provider, model: harness.slice(slash + 1) };
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
  return ownValue(parseJsonVar("APPROVERS", env.APPROVERS, approversSchema, "{}"), tenant) ?? [];
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

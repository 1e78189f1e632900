// Who is calling /v1, and may they reach what the path names. One middleware
// (accessGate) resolves `Authorization: Bearer` to a caller and checks it
// against the tenant (and agent) in the path before any route runs, so every
// route under /v1/tenants/:tenant — also those added later — inherits the
// check. A route whose tenant is in the body calls requireTenant itself.
import type { Context, MiddlewareHandler } from "hono";
import { bearerToken, HttpError, safeEqual } from "../../lib/http.ts";
import { controlPlane, useTenantKey } from "../control/index.ts";
import { recordWrite } from "./audit.ts";
import { checkBounds, type BoundedChange } from "./bounds.ts";
import { adminToken } from "./config.ts";
import { hashKey, KEY_PREFIX, keyTenant } from "./keys.ts";
import { clientOf, credentialFailed, credentialHeld, refuseWhileThrottled } from "./throttle.ts";
import type { AccessEnv, Caller } from "./types.ts";
type AnyContext = Context<{ Bindings: Env }>;

/** The ADMIN_TOKEN holder's name in the audit trail. */
export const PLATFORM_ACTOR = "platform:admin-token";

/**
 * Tenantless /v1 paths (and those below them) a key may reach: each names its
 * tenant in the body or an id and calls requireTenant. Any other tenantless
 * path is the platform's.
 */
export const KEY_ROUTES_WITHOUT_TENANT: readonly string[] = ["/v1/responses"];

/** The caller a bearer credential names; 401 when it names none, 429 while `client` has failed too often (throttle.ts). */
export async function resolveCaller(env: Env, authorization: string | undefined, client: string | null): Promise<Caller> {
  const given = bearerToken(authorization);
  if (!given) throw new HttpError(401, "missing bearer token");
  refuseWhileThrottled(client);
  const failed = (message: string) => {
    credentialFailed(client);
    return new HttpError(401, message);
  };
  let caller: Caller;
  if (given.startsWith(KEY_PREFIX)) {
    const key = await checkKey(env, given);
    if (!key) throw failed("unknown or revoked API key");
    caller = { kind: "key", actor: `key:${key.id}`, keyId: key.id, tenant: key.tenant, access: key.access, agent: key.agent };
  } else {
    if (!safeEqual(given, adminToken(env))) throw failed("wrong bearer token");
    caller = { kind: "platform", actor: PLATFORM_ACTOR };
  }
  credentialHeld(client);
  return caller;
}

/** An old key's tenant by its hash, as the control plane said it: a key's tenant never changes, so this isolate asks once. */
const oldKeyTenants = new Map<string, string>();
const OLD_KEYS_KEPT = 10_000;

/**
 * The live key `given` is, checked in its tenant's own object; null for an
 * unknown or revoked key. A key this release made names its tenant, and no
 * deployment-wide object is asked. An old key (made by a release before,
 * naming none) is looked up by its hash in the control plane's index once per
 * isolate, then checked in its tenant's object like any other.
 */
async function checkKey(env: Env, given: string) {
  const named = keyTenant(given);
  if (named === undefined) return null;
  const hash = await hashKey(given);
  if (named !== null) return useTenantKey(env, named, hash, true);
  let tenant = oldKeyTenants.get(hash) ?? null;
  if (tenant === null) {
    tenant = await controlPlane(env).oldKeyTenant(hash);
    if (tenant === null) return null;
    if (oldKeyTenants.size >= OLD_KEYS_KEPT) oldKeyTenants.clear();
    oldKeyTenants.set(hash, tenant);
  }
  return useTenantKey(env, tenant, hash, false);
}

/** The tenant and agent a /v1 path names (the first `/tenants/<t>` and an `/agents/<a>` right after it), decoded. */
export function pathScope(path: string): { tenant: string; agent?: string } | null {
  const m = /\/tenants\/([^/]*)(?:\/agents\/([^/]*))?/.exec(path);
  if (!m) return null;
  try {
    return { tenant: decodeURIComponent(m[1]!), agent: m[2] === undefined ? undefined : decodeURIComponent(m[2]) };
  } catch {
    // Not a name any tenant has: nothing to reach, whoever asks.
    return { tenant: "\u0000" };
  }
}

const notFound = (c: { req: { method: string; path: string } }) => new HttpError(404, `no route for ${c.req.method} ${c.req.path}`);

/**
 * 404 for a tenant (or agent) that is not the caller's, exactly as for a path
 * that does not exist; 403 for a write by a read-only key or a tenant-wide
 * path reached with a key scoped to one agent.
 */
function checkScope(c: AnyContext, caller: Caller, scope: { tenant: string; agent?: string }, write: boolean): void {
  if (caller.kind === "platform") return;
  if (scope.tenant !== caller.tenant) throw notFound(c);
  if (caller.agent !== null) {
    if (scope.agent === undefined) throw new HttpError(403, `this key is for agent "${caller.agent}" only`);
    if (scope.agent !== caller.agent) throw notFound(c);
  }
  if (write && caller.access === "read") throw new HttpError(403, "this key is read-only");
}

const isWrite = (method: string) => method !== "GET" && method !== "HEAD";

/** The /v1 door: resolve the caller, check the path's tenant, run the route, and write a change it made to the audit trail. */
export const accessGate: MiddlewareHandler<AccessEnv> = async (c, next) => {
  const caller = await resolveCaller(c.env, c.req.header("authorization"), clientOf(c.req.raw));
  c.set("caller", caller);
  const scope = pathScope(c.req.path);
  const write = isWrite(c.req.method);
  if (scope) checkScope(c as unknown as AnyContext, caller, scope, write);
  else if (caller.kind !== "platform" && !KEY_ROUTES_WITHOUT_TENANT.some((path) => c.req.path === path || c.req.path.startsWith(`${path}/`))) throw new HttpError(403, "this route is the platform's");
  if (!write || !scope) return next();
  await recordWrite(c, scope, caller, next);
};

/** The caller the gate resolved (routes under /v1 only). */
export function callerOf(c: AnyContext): Caller {
  const caller = (c as unknown as Context<AccessEnv>).get("caller");
  if (!caller) throw new Error("callerOf: the route is not behind accessGate");
  return caller;
}

/** For a route whose tenant is not in its path (it is in the body): the same check the gate makes on a path. */
export function requireTenant(c: AnyContext, tenant: string, options: { write: boolean; agent?: string }): Caller {
  const caller = callerOf(c);
  checkScope(c, caller, { tenant, agent: options.agent }, options.write);
  return caller;
}

/** Managing keys, roles and webhook secrets: the platform, or a tenant-wide admin key of the tenant. */
export function requireTenantAdmin(c: AnyContext, tenant: string): Caller {
  const caller = requireTenant(c, tenant, { write: false });
  if (caller.kind === "key" && (caller.access !== "admin" || caller.agent !== null)) throw new HttpError(403, "this needs a tenant admin key (or the platform's token)");
  return caller;
}

export function requirePlatform(c: AnyContext): Caller {
  const caller = callerOf(c);
  if (caller.kind !== "platform") throw new HttpError(403, "only the platform (ADMIN_TOKEN) may do this");
  return caller;
}

/** A change a tenant's key makes is checked against the platform's bounds for the tenant (403 naming the bound); the platform is not bound. */
export async function withinBounds(c: AnyContext, tenant: string, change: BoundedChange): Promise<void> {
  if (callerOf(c).kind === "key") await checkBounds(c.env, tenant, change);
}

// Per-tenant and per-agent settings through the Agents API: a mount with the
// same alias replaces the one from MOUNTS; the agent's model choice wins over
// the tenant's, which wins over HARNESS_MODEL; likewise the second-message strategy.
import type { Context, Hono } from "hono";
import * as z from "zod";
import { HttpError } from "../../lib/http.ts";
import { ConfigError } from "../../lib/config.ts";
import type { RouteDoc } from "../../lib/route-doc.ts";
import { errors, serve } from "../../lib/serve-route.ts";
import { Gateway, MountError, policyWarnings, type Mount, type Plugin } from "../../plugins/index.ts";
import { deploymentModel, modelPickSchema, modelProviders, pickProblem, type ModelPick } from "../models/index.ts";
import { agentSettings, modelFrom, mountList, mountsFrom, parseSettings, refProblem, secretsSet, type SecretRef, type SettingAudit, type SettingKind } from "../control/index.ts";
import { callerOf, markAudited } from "../access/index.ts";
import { secondMessageSchema } from "../turns/index.ts";
import { withinBounds } from "../access/index.ts";
import type { Route } from "../chat.ts";
import { changeSetting, secondMessageOf } from "./settings.ts";
import { agentParams, tenantParams } from "./schemas.ts";

/** A gateway built only to inspect mounts: it resolves no secret and keeps no state. */
function inspectMounts(mounts: Mount[], plugins: readonly Plugin[]): Gateway {
  return new Gateway(mounts, plugins, { secret: () => ({ missing: "not resolved: the mounts are only inspected" }), session: () => ({ get: () => undefined, set: () => undefined }) });
}

/** A mount list checked the way a pass will use it (known plugins, valid configs): 400 naming the problem. */
export function checkMounts(mounts: Mount[], plugins: readonly Plugin[]): Mount[] {
  try {
    inspectMounts(mounts, plugins);
  } catch (err) {
    if (err instanceof MountError) throw new HttpError(400, `bad body: ${err.message}`);
    throw err;
  }
  return mounts;
}

/** A platform mount a tenant keeps as it is (its policy aside): it stays the platform's. */
function keptAsIs(mount: Mount, current: Mount[]): boolean {
  const was = current.find((m) => m.alias === mount.alias && m.set_by === "platform");
  return was !== undefined && was.plugin === mount.plugin && was.secret_ref === mount.secret_ref && JSON.stringify(was.config) === JSON.stringify(mount.config);
}

/**
 * A mount list or model choice as its writer may make it (invariant 5): the
 * platform's is stamped `set_by: "platform"`, so the secrets it names may be
 * Worker secrets; a tenant's is not (but for a platform mount it keeps as it
 * is), so they are its own or granted to it. Every secret named is checked
 * now: 400 naming the rule.
 */
export async function stampSetter(c: Context<{ Bindings: Env }>, route: Route, kind: SettingKind, value: unknown): Promise<unknown> {
  if (value === null || kind === "secondMessage") return value;
  const platform = callerOf(c).kind === "platform";
  const setBy = (own: boolean) => (own ? { set_by: "platform" as const } : {});
  let stamped: Mount[] | ModelPick;
  let refs: SecretRef[];
  if (kind === "mounts") {
    const current = platform ? [] : mountsFrom(c.env, parseSettings(await agentSettings(c.env, route)));
    const mounts = (value as Mount[]).map(({ set_by: _, ...mount }): Mount => ({ ...mount, ...setBy(platform || keptAsIs(mount, current)) }));
    refs = mounts.flatMap((m) => (m.secret_ref ? [{ name: m.secret_ref, setBy: m.set_by, what: `mount "${m.alias}"` }] : []));
    stamped = mounts;
  } else {
    const { set_by: _, ...pick } = value as ModelPick;
    stamped = { ...pick, ...setBy(platform) };
    refs = pick.secret ? [{ name: pick.secret, setBy: stamped.set_by, what: "the model choice" }] : [];
  }
  const has = platform ? new Set<string>() : await secretsSet(c.env, route.tenant, refs.map((r) => r.name));
  const problem = refs.map((r) => refProblem(c.env, route.tenant, r, has.has(r.name))).find((p) => p !== null);
  if (problem) throw new HttpError(400, `bad body: ${problem}`);
  return stamped;
}

/** A model choice checked against MODEL_PROVIDERS and the model table: 400 naming the problem. */
export function checkModelPick(env: Env, pick: ModelPick): ModelPick {
  const problem = pickProblem(modelProviders(env), pick);
  if (problem) throw new HttpError(400, `bad body: ${problem}`);
  return pick;
}

const mountsBody = mountList.meta({ examples: [[{ alias: "notes", plugin: "memory", policy: { write: "approval" } }]] });
const modelBody = modelPickSchema.meta({ examples: [{ model: "local" }] });
/** `strategy`: what a person's message does while a turn runs (runtime/turns/second-message.ts). */
const strategyBody = z.object({ strategy: secondMessageSchema }).strict().meta({ examples: [{ strategy: "queue" }] });
const changed = z.looseObject({ ok: z.literal(true), agents: z.number() });

const KINDS = { mounts: "mounts", model: "models", "second-message": "secondMessage" } as const satisfies Record<string, SettingKind>;

/** PUT and DELETE of each setting, per tenant and per agent. */
const settingDocs = (["tenant", "agent"] as const).flatMap((scope) =>
  (Object.keys(KINDS) as (keyof typeof KINDS)[]).flatMap((setting) => {
    const path = `${scope === "tenant" ? "/tenants/{tenant}" : "/tenants/{tenant}/agents/{agent}"}/${setting}`;
    const params = scope === "tenant" ? tenantParams : agentParams;
    const body = setting === "mounts" ? mountsBody : setting === "model" ? modelBody : strategyBody;
    const put = { method: "put" as const, path, summary: `Set the ${scope}'s ${setting}`, params, body, responses: { 200: { description: "Set, and every affected agent told.", schema: changed }, ...errors(400, ...(setting === "model" ? [403] : []), 413, 415, 503) } };
    const remove = { method: "delete" as const, path, summary: `Remove the ${scope}'s own ${setting} (it inherits again)`, params, responses: { 200: { description: "Removed.", schema: changed }, ...errors(400, 503) } };
    return [{ scope, setting, put, remove }];
  }),
) satisfies { put: RouteDoc; remove: RouteDoc }[];

const effectiveMounts = {
  method: "get",
  path: "/tenants/{tenant}/agents/{agent}/mounts",
  summary: "The agent's mounts as a pass uses them, their tools' policies and warnings",
  params: agentParams,
  responses: {
    200: { description: "The mounts in effect.", schema: z.object({ mounts: z.array(z.looseObject({ alias: z.string(), plugin: z.string() })), tools: z.array(z.unknown()), warnings: z.array(z.unknown()) }) },
    ...errors(400),
  },
} satisfies RouteDoc;

const pickShape = z.looseObject({ model: z.string() });
const effectiveModel = {
  method: "get",
  path: "/tenants/{tenant}/agents/{agent}/model",
  summary: "The agent's model: the one in effect, the deployment's, the tenant's and its own",
  params: agentParams,
  responses: { 200: { description: "The model choice.", schema: z.object({ effective: pickShape, deployment: pickShape, tenant: pickShape.nullable(), agent: pickShape.nullable() }) }, ...errors(400) },
} satisfies RouteDoc;

const strategy = secondMessageSchema;
const effectiveStrategy = {
  method: "get",
  path: "/tenants/{tenant}/agents/{agent}/second-message",
  summary: "The agent's second-message strategy: in effect, the default, the tenant's and its own",
  params: agentParams,
  responses: { 200: { description: "The strategy.", schema: z.object({ effective: strategy, default: strategy, tenant: strategy.nullable(), agent: strategy.nullable() }) }, ...errors(400) },
} satisfies RouteDoc;

export const settingRouteDocs: RouteDoc[] = [...settingDocs.flatMap((d) => [d.put, d.remove]), effectiveMounts, effectiveModel, effectiveStrategy];

export function settingRoutes(api: Hono<{ Bindings: Env }>, plugins: readonly Plugin[]): void {
  for (const { scope, setting, put, remove } of settingDocs) {
    const kind = KINDS[setting];
    const routeOf = (params: { tenant: string; agent?: string }): Route => ({ tenant: params.tenant, agent: params.agent ?? "any" });
    // The change writes its own trail row (changeSetting), with the value before read in its transaction; the gate writes no second one.
    const audit = (c: Context<{ Bindings: Env }>, verb: "set" | "remove", after: unknown): SettingAudit => {
      markAudited(c);
      return { actor: callerOf(c).actor, action: `${setting}.${verb}`, subject: c.req.path.replace(/^\/v1(?=\/)/, ""), after };
    };
    serve(api, put, async (c, { params, body }) => {
      if (kind === "models") await withinBounds(c, params.tenant, { model: (body as ModelPick).model });
      const checked = kind === "mounts" ? checkMounts(body as Mount[], plugins) : kind === "models" ? checkModelPick(c.env, body as ModelPick) : (body as { strategy: string }).strategy;
      const value = await stampSetter(c, routeOf(params), kind, checked);
      const echo = kind === "models" ? { model: value } : kind === "secondMessage" ? { strategy: value } : {};
      return c.json({ ok: true, ...echo, ...(await changeSetting(c.env, kind, routeOf(params), scope, value, audit(c, "set", body))) });
    });
    serve(api, remove, async (c, { params }) => c.json({ ok: true, ...(await changeSetting(c.env, kind, routeOf(params), scope, null, audit(c, "remove", null))) }));
  }

  serve(api, effectiveMounts, async (c, { params }) => {
    const mounts = mountsFrom(c.env, parseSettings(await agentSettings(c.env, params)));
    let gateway: Gateway;
    try {
      gateway = inspectMounts(mounts, plugins);
    } catch (err) {
      // The mounts were accepted once (MOUNTS, or a PUT under older plugins): the deployment is misconfigured, not the request.
      if (err instanceof MountError) throw new ConfigError(err.message);
      throw err;
    }
    return c.json({ mounts, tools: gateway.toolPolicies(), warnings: policyWarnings(gateway.mountsUnderPolicy()) });
  });

  serve(api, effectiveModel, async (c, { params }) => {
    const settings = parseSettings(await agentSettings(c.env, params));
    return c.json({ effective: modelFrom(c.env, settings), deployment: deploymentModel(c.env), tenant: settings.models.tenant, agent: settings.models.agent });
  });

  serve(api, effectiveStrategy, async (c, { params }) => c.json(await secondMessageOf(c.env, params)));
}


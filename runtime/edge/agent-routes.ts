// Agents as resources of the Agents API: create one with its settings, list a
// tenant's, read, change (description, model, mounts, policy, second-message
// strategy) and delete. The tenant's own object keeps the record and decides
// whether a name is taken (runtime/control); a deletion is carried out by the
// agent's own object (runtime/object/deletion.ts) first.
import type { Context, Hono } from "hono";
import * as z from "zod";
import { HttpError } from "../../lib/http.ts";
import type { RouteDoc } from "../../lib/route-doc.ts";
import { errors, serve } from "../../lib/serve-route.ts";
import { mountPolicy, mountSchema, type Mount, type Plugin } from "../../plugins/index.ts";
import { agentSettings, modelFrom, mountList, mountsFrom, parseSettings, secondMessageFrom, tenantStub, type SettingKind, type TenantAgent } from "../control/index.ts";
import { modelPickSchema } from "../models/index.ts";
import { agentStub } from "../object/index.ts";
import { withinBounds } from "../access/index.ts";
import { secondMessageSchema } from "../turns/index.ts";
import type { Route } from "../chat.ts";
import { NAME } from "./ingress.ts";
import { changeSetting } from "./settings.ts";
import { checkModelPick, checkMounts, stampSetter } from "./setting-routes.ts";
import { agentParams, tenantParams } from "./schemas.ts";

const description = z.string().trim().max(2_000).nullable();
const settings = {
  description: description.optional(),
  model: modelPickSchema.nullable().optional(),
  mounts: mountList.nullable().optional().meta({ description: "The agent's own mounts (null: none of its own)." }),
  secondMessage: secondMessageSchema.nullable().optional(),
};

const createBody = z
  .object({ agent: z.string().regex(NAME, "agent: letters, digits, . _ - (max 128)"), ...settings })
  .strict()
  .meta({ examples: [{ agent: "helper", description: "Answers questions about the team calendar.", model: { model: "local" }, secondMessage: "queue" }] });

const updateBody = z
  .object({
    ...settings,
    policy: z.record(z.string(), mountPolicy).optional().meta({ description: "Per mount alias, the policy to run it under." }),
  })
  .strict()
  .refine((body) => Object.keys(body).length > 0, "name at least one of description, model, mounts, policy, secondMessage")
  .meta({ examples: [{ description: "Answers calendar questions; asks before writing.", secondMessage: "steer" }] });

const pick = z.looseObject({ model: z.string() });
const agentView = z.object({
  tenant: z.string(),
  agent: z.string(),
  description: z.string().nullable(),
  platform: z.string().nullable(),
  createdAt: z.iso.datetime(),
  model: z.object({ effective: pick, own: pick.nullable() }),
  mounts: z.object({ effective: z.array(z.looseObject({ alias: z.string(), plugin: z.string() })), own: z.array(z.looseObject({ alias: z.string() })).nullable() }),
  secondMessage: z.object({ effective: secondMessageSchema, own: secondMessageSchema.nullable() }),
});
const listed = z.object({ tenant: z.string(), agent: z.string(), description: z.string().nullable(), platform: z.string().nullable(), createdAt: z.iso.datetime() });

const createAgent = {
  method: "post",
  path: "/tenants/{tenant}/agents",
  summary: "Create an agent with its description, model, mounts and second-message strategy",
  params: tenantParams,
  body: createBody,
  responses: { 201: { description: "Created.", schema: agentView }, ...errors(400, 403, 409, 413, 415, 503) },
} satisfies RouteDoc;

const listTenantAgents = {
  method: "get",
  path: "/tenants/{tenant}/agents",
  summary: "A tenant's agents (created here or first reached from a chat), by name",
  params: tenantParams,
  responses: { 200: { description: "The agents.", schema: z.object({ agents: z.array(listed) }) }, ...errors(400) },
} satisfies RouteDoc;

const readAgent = {
  method: "get",
  path: "/tenants/{tenant}/agents/{agent}",
  summary: "An agent and its settings, as in effect and as its own",
  params: agentParams,
  responses: { 200: { description: "The agent.", schema: agentView }, ...errors(400, 404) },
} satisfies RouteDoc;

const updateAgent = {
  method: "patch",
  path: "/tenants/{tenant}/agents/{agent}",
  summary: "Change an agent's description, model, mounts, policy or second-message strategy (null: its own removed)",
  params: agentParams,
  body: updateBody,
  responses: { 200: { description: "Changed, and the agent told.", schema: agentView }, ...errors(400, 403, 404, 413, 415, 503) },
} satisfies RouteDoc;

const deleteAgent = {
  method: "delete",
  path: "/tenants/{tenant}/agents/{agent}",
  summary: "Delete an agent: its turns stop, its chats are told, it answers 404 from then on",
  params: agentParams,
  responses: {
    200: {
      description: "Deleted.",
      schema: z.object({ deleted: z.literal(true), deletedAt: z.iso.datetime(), stoppedTurns: z.number(), holdsSettled: z.number(), chatsTold: z.number() }),
    },
    ...errors(400, 404),
  },
} satisfies RouteDoc;

export const agentRouteDocs: RouteDoc[] = [createAgent, listTenantAgents, readAgent, updateAgent, deleteAgent];

const iso = (ms: number) => new Date(ms).toISOString();
const listing = (tenant: string, a: TenantAgent) => ({ tenant, agent: a.agent, description: a.description, platform: a.platform, createdAt: iso(a.firstSeen) });

/** The live agent's record, or a 404 that says whether it never existed or was deleted. */
async function liveAgent(env: Env, route: Route): Promise<TenantAgent> {
  const record = await tenantStub(env, route.tenant).agent(route.tenant, route.agent);
  if (!record) throw new HttpError(404, `no agent "${route.agent}" in tenant "${route.tenant}"`);
  if (record.deletedAt !== null) throw new HttpError(404, `agent "${route.agent}" of tenant "${route.tenant}" was deleted (${iso(record.deletedAt)})`);
  return record;
}

async function view(env: Env, route: Route) {
  const [record, text] = await Promise.all([liveAgent(env, route), agentSettings(env, route)]);
  const s = parseSettings(text);
  return {
    ...listing(route.tenant, record),
    model: { effective: modelFrom(env, s), own: s.models.agent },
    mounts: { effective: mountsFrom(env, s), own: s.mounts.agent },
    secondMessage: { effective: secondMessageFrom(s), own: s.secondMessage.agent },
  };
}

type Settings = z.output<typeof createBody> | z.output<typeof updateBody>;

/** Every setting given, checked (the secrets each names too) before any is stored; the caller stores each (its agent told before the next). */
async function settingChanges(c: Context<{ Bindings: Env }>, route: Route, body: Settings, plugins: readonly Plugin[]): Promise<[SettingKind, unknown][]> {
  const { env } = c;
  const changes: [SettingKind, unknown][] = [];
  if (body.model !== undefined) changes.push(["models", body.model && checkModelPick(env, body.model)]);
  let mounts = body.mounts === undefined ? undefined : body.mounts && checkMounts(body.mounts, plugins);
  if ("policy" in body && body.policy) mounts = checkMounts(await withPolicies(env, route, mounts, body.policy), plugins);
  if (mounts !== undefined) changes.push(["mounts", mounts]);
  if (body.secondMessage !== undefined) changes.push(["secondMessage", body.secondMessage]);
  return Promise.all(changes.map(async ([kind, value]): Promise<[SettingKind, unknown]> => [kind, await stampSetter(c, route, kind, value)]));
}

/** The agent's own mounts with each named mount (its own or inherited) under the given policy. */
async function withPolicies(env: Env, route: Route, own: Mount[] | null | undefined, policies: Record<string, z.output<typeof mountPolicy>>): Promise<Mount[]> {
  const settings = parseSettings(await agentSettings(env, route));
  const base = own === undefined ? (settings.mounts.agent ?? []) : (own ?? []);
  const effective = mountsFrom(env, { ...settings, mounts: { ...settings.mounts, agent: base } });
  const byAlias = new Map(base.map((m) => [m.alias, m]));
  for (const [alias, policy] of Object.entries(policies)) {
    const mount = effective.find((m) => m.alias === alias);
    if (!mount) throw new HttpError(400, `bad body: policy names mount "${alias}", which this agent does not have (it has ${effective.map((m) => m.alias).join(", ") || "none"})`);
    byAlias.set(alias, mountSchema.parse({ ...mount, policy }));
  }
  return [...byAlias.values()];
}

export function agentRoutes(api: Hono<{ Bindings: Env }>, plugins: readonly Plugin[]): void {
  serve(api, createAgent, async (c, { params, body }) => {
    const route = { tenant: params.tenant, agent: body.agent };
    // Checked before the name is taken: a bad setting leaves nothing behind.
    if (body.model) await withinBounds(c, route.tenant, { model: body.model.model });
    const changes = await settingChanges(c, route, body, plugins);
    const holder = await tenantStub(c.env, route.tenant).createAgent(route.tenant, route.agent, body.description ?? null);
    if (holder) {
      throw new HttpError(409, holder.deletedAt !== null ? `agent "${body.agent}" was deleted; a deleted agent's name is not reused` : `agent "${body.agent}" already exists: PATCH it to change it`);
    }
    for (const [kind, value] of changes) await changeSetting(c.env, kind, route, "agent", value);
    return c.json(await view(c.env, route), 201);
  });

  serve(api, listTenantAgents, async (c, { params }) => c.json({ agents: (await tenantStub(c.env, params.tenant).agents(params.tenant)).map((a) => listing(params.tenant, a)) }));

  serve(api, readAgent, async (c, { params }) => c.json(await view(c.env, params)));

  serve(api, updateAgent, async (c, { params, body }) => {
    await liveAgent(c.env, params);
    if (body.model) await withinBounds(c, params.tenant, { model: body.model.model });
    for (const [kind, value] of await settingChanges(c, params, body, plugins)) await changeSetting(c.env, kind, params, "agent", value);
    if (body.description !== undefined) await tenantStub(c.env, params.tenant).describeAgent(params.tenant, params.agent, body.description);
    return c.json(await view(c.env, params));
  });

  serve(api, deleteAgent, async (c, { params }) => {
    await liveAgent(c.env, params);
    // The object first: once it answers, nothing runs; the record then goes from every list.
    const report = await agentStub(c.env, params).deleteAgent(params);
    await tenantStub(c.env, params.tenant).deleteAgent(params.tenant, params.agent);
    return c.json({ deleted: true as const, deletedAt: iso(report.deletedAt), stoppedTurns: report.stopped, holdsSettled: report.holdsSettled, chatsTold: report.told });
  });
}

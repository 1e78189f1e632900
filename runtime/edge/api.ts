// The Agents API: drive an agent without a chat platform, behind ADMIN_TOKEN or a scoped key (runtime/access).
import { Hono, type Context } from "hono";
import * as z from "zod";
import { CONVERSATION_ID, parseRoute, readConversation, submitEvent } from "./ingress.ts";
import { HttpError, parseJson, readBody } from "../../lib/http.ts";
import { ConfigError } from "../../lib/config.ts";
import { accessGate, accessRoutes } from "../access/index.ts";
import { deploymentModel, modelProviders, modelPickSchema, pickProblem, type ModelPick } from "../models/index.ts";
import { controlPlane, modelFrom, mountsFrom, parseSettings, mountList } from "../control/index.ts";
import { secondMessageSchema } from "../turns/index.ts";
import type { RuntimeDeps } from "../chat.ts";
import { changeSetting, secondMessageOf } from "./settings.ts";
import { Gateway, MountError, policyWarnings, type Mount, type Plugin } from "../../plugins/index.ts";
import { usageRoutes } from "./usage-routes.ts";


export const API_MAX_BODY_BYTES = 64 * 1024;

const conversationId = (error?: string) => z.string({ error }).regex(CONVERSATION_ID, "conversation: letters, digits, : . _ - (max 200)");

/** A message or a steer carries text; an interrupt or a command (stop, compact, status) carries none but must name its conversation. */
const messageBody = z.preprocess(
  (body) => (body !== null && typeof body === "object" && !("kind" in body) ? { ...body, kind: "message" } : body),
  z.discriminatedUnion("kind", [
    z.object({
      kind: z.enum(["message", "steer"]),
      text: z.string().trim().min(1, "text must not be empty").max(32_000),
      conversation: conversationId().optional(),
    }),
    z.object({ kind: z.literal("interrupt"), conversation: conversationId("an interrupt names the conversation it stops") }),
    z.object({ kind: z.literal("command"), command: z.enum(["stop", "compact", "status"]), conversation: conversationId("a command names its conversation") }),
  ]),
);

/** `strategy`: what a person's message does while a turn runs (runtime/turns/second-message.ts). */
const secondMessageBody = z.object({ strategy: secondMessageSchema }).strict();

/** A JSON body parsed with `schema`; a body that does not fit is answered with `status`, naming what is wrong. */
async function readJson<T>(c: Context<{ Bindings: Env }>, schema: z.ZodType<T>, status: 400 | 422 = 422): Promise<T> {
  const raw = await readBody(c, { contentTypes: ["application/json"], maxBytes: API_MAX_BODY_BYTES });
  const parsed = schema.safeParse(parseJson(raw));
  if (!parsed.success) throw new HttpError(status, z.prettifyError(parsed.error));
  return parsed.data;
}

/** A gateway built only to inspect mounts: it resolves no secret and keeps no state. */
function inspectMounts(mounts: Mount[], plugins: readonly Plugin[]): Gateway {
  return new Gateway(mounts, plugins, { secret: () => undefined, session: () => ({ get: () => undefined, set: () => undefined }) });
}

/** Checks a mount list the way a pass will use it: known plugins, valid configs. */
async function readMounts(c: Context<{ Bindings: Env }>, plugins: readonly Plugin[]) {
  const mounts = await readJson(c, mountList);
  try {
    inspectMounts(mounts, plugins);
  } catch (err) {
    if (err instanceof MountError) throw new HttpError(422, err.message);
    throw err;
  }
  return mounts;
}

/** A model choice as the admin API takes it: parsed, then checked against MODEL_PROVIDERS and the model table. */
async function readModelPick(c: Context<{ Bindings: Env }>): Promise<ModelPick> {
  const pick = await readJson(c, modelPickSchema);
  const problem = pickProblem(modelProviders(c.env), pick);
  if (problem) throw new HttpError(400, problem);
  return pick;
}

/** The Agents API over the given plugins (for inspecting mounts). */
export function agentsApi(deps: RuntimeDeps): Hono<{ Bindings: Env }> {
  const api = new Hono<{ Bindings: Env }>();

  api.use("*", accessGate);
  accessRoutes(api);

  api.post("/tenants/:tenant/agents/:agent/messages", async (c) => {
    const route = parseRoute(c.req.param("tenant"), c.req.param("agent"));
    const body = await readJson(c, messageBody);
    const conversation = body.conversation ?? `api-${crypto.randomUUID()}`;
    const id = c.req.header("idempotency-key") ?? crypto.randomUUID();
    const user = { platform: "api" as const, id: "admin" };
    const base = { id: `api:${id}`, conversation, user };
    const event =
      body.kind === "interrupt" ? { ...base, kind: body.kind } : body.kind === "command" ? { ...base, kind: body.kind, command: body.command } : { ...base, kind: body.kind, text: body.text };
    const result = await submitEvent(c.env, route, event);
    return c.json(result, 202);
  });

  api.get("/tenants/:tenant/agents/:agent/conversations/:id", async (c) => {
    const route = parseRoute(c.req.param("tenant"), c.req.param("agent"));
    return c.json(await readConversation(c.env, route, c.req.param("id")));
  });

  // Per-tenant and per-agent settings: a mount with the same alias replaces the one from MOUNTS;
  // the agent's model choice wins over the tenant's, which wins over HARNESS_MODEL.
  for (const scope of ["tenant", "agent"] as const) {
    const base = scope === "tenant" ? "/tenants/:tenant" : "/tenants/:tenant/agents/:agent";
    const routeOf = (c: Context<{ Bindings: Env }>) => parseRoute(c.req.param("tenant")!, c.req.param("agent") ?? "any");
    api.put(`${base}/mounts`, async (c) => c.json({ ok: true, ...(await changeSetting(c.env, "mounts", routeOf(c), scope, await readMounts(c, deps.plugins))) }));
    api.delete(`${base}/mounts`, async (c) => c.json({ ok: true, ...(await changeSetting(c.env, "mounts", routeOf(c), scope, null)) }));
    api.put(`${base}/model`, async (c) => {
      const pick = await readModelPick(c);
      return c.json({ ok: true, model: pick, ...(await changeSetting(c.env, "models", routeOf(c), scope, pick)) });
    });
    api.delete(`${base}/model`, async (c) => c.json({ ok: true, ...(await changeSetting(c.env, "models", routeOf(c), scope, null)) }));
    api.put(`${base}/second-message`, async (c) => {
      const { strategy } = await readJson(c, secondMessageBody, 400);
      return c.json({ ok: true, strategy, ...(await changeSetting(c.env, "secondMessage", routeOf(c), scope, strategy)) });
    });
    api.delete(`${base}/second-message`, async (c) => c.json({ ok: true, ...(await changeSetting(c.env, "secondMessage", routeOf(c), scope, null)) }));
  }

  api.get("/tenants/:tenant/agents/:agent/mounts", async (c) => {
    const route = parseRoute(c.req.param("tenant"), c.req.param("agent"));
    const mounts = mountsFrom(c.env, parseSettings(await controlPlane(c.env).settingsFor(route)));
    let gateway: Gateway;
    try {
      gateway = inspectMounts(mounts, deps.plugins);
    } catch (err) {
      // The mounts were accepted once (MOUNTS, or a PUT under older plugins): the deployment is misconfigured, not the request.
      if (err instanceof MountError) throw new ConfigError(err.message);
      throw err;
    }
    return c.json({ mounts, tools: gateway.toolPolicies(), warnings: policyWarnings(gateway.mountsUnderPolicy()) });
  });

  api.get("/tenants/:tenant/agents/:agent/model", async (c) => {
    const route = parseRoute(c.req.param("tenant"), c.req.param("agent"));
    const settings = parseSettings(await controlPlane(c.env).settingsFor(route));
    return c.json({ effective: modelFrom(c.env, settings), deployment: deploymentModel(c.env), tenant: settings.models.tenant, agent: settings.models.agent });
  });
  api.get("/tenants/:tenant/agents/:agent/second-message", async (c) => c.json(await secondMessageOf(c.env, parseRoute(c.req.param("tenant"), c.req.param("agent")))));
  usageRoutes(api);
  return api;
}

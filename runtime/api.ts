// The Agents API: drive an agent without a chat platform, behind ADMIN_TOKEN.
import { Hono, type Context } from "hono";
import { z } from "zod";
import { CONVERSATION_ID, parseRoute, readConversation, submitEvent } from "./ingress.ts";
import { HttpError, parseJson, readBody, safeEqual } from "../lib/http.ts";
import { ConfigError } from "../lib/config.ts";
import { adminToken, deploymentModel, effectiveModel, effectiveMounts, modelProviders, mountList, MODELS_NAMESPACE, MOUNTS_NAMESPACE } from "./config.ts";
import { modelPickSchema, pickProblem, type ModelPick } from "./models/index.ts";
import { controlPlane } from "./control-plane.ts";
import { Gateway, MountError, policyWarnings, type Mount, type Plugin } from "../plugins/index.ts";
import type { RuntimeDeps } from "./deps.ts";


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


/** A gateway built only to inspect mounts: it resolves no secret and keeps no state. */
function inspectMounts(mounts: Mount[], plugins: readonly Plugin[]): Gateway {
  return new Gateway(mounts, plugins, { secret: () => undefined, session: () => ({ get: () => undefined, set: () => undefined }) });
}

/** Checks a mount list the way a pass will use it: known plugins, valid configs. */
async function readMounts(c: Context<{ Bindings: Env }>, plugins: readonly Plugin[]) {
  const raw = await readBody(c, { contentTypes: ["application/json"], maxBytes: API_MAX_BODY_BYTES });
  const parsed = mountList.safeParse(parseJson(raw));
  if (!parsed.success) throw new HttpError(422, z.prettifyError(parsed.error));
  try {
    inspectMounts(parsed.data, plugins);
  } catch (err) {
    if (err instanceof MountError) throw new HttpError(422, err.message);
    throw err;
  }
  return parsed.data;
}

/** A model choice as the admin API takes it: parsed, then checked against MODEL_PROVIDERS and the model table. */
async function readModelPick(c: Context<{ Bindings: Env }>): Promise<ModelPick> {
  const raw = await readBody(c, { contentTypes: ["application/json"], maxBytes: API_MAX_BODY_BYTES });
  const parsed = modelPickSchema.safeParse(parseJson(raw));
  if (!parsed.success) throw new HttpError(422, z.prettifyError(parsed.error));
  const problem = pickProblem(modelProviders(c.env), parsed.data);
  if (problem) throw new HttpError(400, problem);
  return parsed.data;
}

/** The Agents API over the given plugins (for inspecting mounts). */
export function agentsApi(deps: RuntimeDeps): Hono<{ Bindings: Env }> {
  const api = new Hono<{ Bindings: Env }>();

  api.use("*", async (c, next) => {
    const token = adminToken(c.env);
    const given = /^Bearer (.+)$/.exec(c.req.header("authorization") ?? "")?.[1];
    if (!given) throw new HttpError(401, "missing bearer token: send Authorization: Bearer <ADMIN_TOKEN>");
    if (!safeEqual(given, token)) throw new HttpError(401, "wrong bearer token");
    await next();
  });

  api.post("/tenants/:tenant/agents/:agent/messages", async (c) => {
    const route = parseRoute(c.req.param("tenant"), c.req.param("agent"));
    const raw = await readBody(c, { contentTypes: ["application/json"], maxBytes: API_MAX_BODY_BYTES });
    const parsed = messageBody.safeParse(parseJson(raw));
    if (!parsed.success) throw new HttpError(422, z.prettifyError(parsed.error));
    const body = parsed.data;
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

  // Per-tenant and per-agent mount overrides: a mount with the same alias replaces the one from MOUNTS.
  api.put("/tenants/:tenant/mounts", async (c) => {
    const route = parseRoute(c.req.param("tenant"), "any");
    await controlPlane(c.env).put(MOUNTS_NAMESPACE, route.tenant, await readMounts(c, deps.plugins));
    return c.json({ ok: true });
  });

  api.put("/tenants/:tenant/agents/:agent/mounts", async (c) => {
    const route = parseRoute(c.req.param("tenant"), c.req.param("agent"));
    await controlPlane(c.env).put(MOUNTS_NAMESPACE, `${route.tenant}/${route.agent}`, await readMounts(c, deps.plugins));
    return c.json({ ok: true });
  });

  api.get("/tenants/:tenant/agents/:agent/mounts", async (c) => {
    const route = parseRoute(c.req.param("tenant"), c.req.param("agent"));
    const mounts = await effectiveMounts(c.env, route);
    let gateway: Gateway;
    try {
      gateway = inspectMounts(mounts, deps.plugins);
    } catch (err) {
      // The mounts were accepted once (MOUNTS, or a PUT under older plugins): the deployment is misconfigured, not the request.
      if (err instanceof MountError) throw new ConfigError(err.message);
      throw err;
    }
    return c.json({ mounts, tools: gateway.tools().map((t) => ({ name: t.name, policy: gateway.policy(t.name) })), warnings: policyWarnings(gateway.mountsUnderPolicy()) });
  });
  // Model choice per tenant and per agent: the agent's wins over the tenant's, which wins over HARNESS_MODEL.
  for (const path of ["/tenants/:tenant/model", "/tenants/:tenant/agents/:agent/model"]) {
    const keyOf = (c: Context<{ Bindings: Env }>) => {
      const route = parseRoute(c.req.param("tenant")!, c.req.param("agent") ?? "any");
      return c.req.param("agent") === undefined ? route.tenant : `${route.tenant}/${route.agent}`;
    };
    api.put(path, async (c) => {
      const key = keyOf(c);
      const pick = await readModelPick(c);
      await controlPlane(c.env).put(MODELS_NAMESPACE, key, pick);
      return c.json({ ok: true, model: pick });
    });
    api.delete(path, async (c) => c.json({ ok: await controlPlane(c.env).delete(MODELS_NAMESPACE, keyOf(c)) }));
  }

  api.get("/tenants/:tenant/agents/:agent/model", async (c) => {
    const route = parseRoute(c.req.param("tenant"), c.req.param("agent"));
    const control = controlPlane(c.env);
    const [tenant, agent] = await Promise.all([control.get(MODELS_NAMESPACE, route.tenant), control.get(MODELS_NAMESPACE, `${route.tenant}/${route.agent}`)]);
    return c.json({ effective: await effectiveModel(c.env, route), deployment: deploymentModel(c.env), tenant, agent });
  });
  return api;
}

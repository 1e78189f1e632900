// The Agents API: drive an agent without a chat platform, behind ADMIN_TOKEN or a scoped key (runtime/access).
// Every route is described (lib/route-doc.ts) and served through that
// description (lib/serve-route.ts): the same zod schemas validate the request
// and make the OpenAPI document (lib/openapi.ts, served at /v1/openapi.json).
import { Hono } from "hono";
import * as z from "zod";
import { readConversation, submitEvent } from "./ingress.ts";
import { FILE_NAME_MAX_CHARS, FILES_MAX_COUNT, IMAGE_TYPES, readGivenFiles, readsType } from "./files.ts";
import { errors, serve } from "../../lib/serve-route.ts";
import type { RouteDoc } from "../../lib/route-doc.ts";
import { accessGate, accessRoutes, accessRouteDocs, callerOf, markAudited } from "../access/index.ts";
import type { RuntimeDeps } from "../chat.ts";
import { fromBase64 } from "../../lib/base64.ts";
import { agentParams, conversationId, conversationReadParams, conversationView, submitResult } from "./schemas.ts";
import { agentRouteDocs, agentRoutes } from "./agent-routes.ts";
import { conversationRouteDocs, conversationRoutes } from "./conversation-routes.ts";
import { settingRouteDocs, settingRoutes } from "./setting-routes.ts";
import { usageRouteDocs, usageRoutes } from "./usage-routes.ts";
import { objectCallRouteDocs, objectCallRoutes } from "./object-call-routes.ts";

/** A file sent with a message, inline (the whole body is at most 64 KiB): a picture for a model that takes images, or a text file. */
const attachment = z.object({
  name: z.string().min(1).max(FILE_NAME_MAX_CHARS),
  type: z.string().refine(readsType, `type is one of ${IMAGE_TYPES.join(", ")} or a text type (text/*, JSON, XML, YAML, code)`),
  data: z.base64("data is the file's bytes in base64"),
});

/** A message or a steer carries text (`kind` may be left out: a message); an interrupt or a command (stop, compact, status) carries none but must name its conversation. */
const messageBody = z.discriminatedUnion("kind", [
  z.object({
    kind: z.enum(["message", "steer"]).default("message"),
    text: z.string().trim().min(1, "text must not be empty").max(32_000),
    conversation: conversationId().optional().meta({ description: "Left out: a new conversation api-<uuid>." }),
    attachments: z.array(attachment).max(FILES_MAX_COUNT).optional(),
  }),
  z.object({ kind: z.literal("interrupt"), conversation: conversationId("an interrupt names the conversation it stops") }),
  z.object({ kind: z.literal("command"), command: z.enum(["stop", "compact", "status"]), conversation: conversationId("a command names its conversation") }),
]).meta({ examples: [{ text: "What is on my calendar today?", conversation: "c1" }] });

const sendMessage = {
  method: "post",
  path: "/tenants/{tenant}/agents/{agent}/messages",
  summary: "Send a message, a steer, an interrupt or a command to an agent (Idempotency-Key: a retry is one event)",
  params: agentParams,
  body: messageBody,
  responses: { 202: { description: "Accepted: the agent works on it; read the conversation for its answer.", schema: submitResult }, ...errors(400, 404, 413, 415) },
} satisfies RouteDoc;

const readOne = {
  method: "get",
  path: "/tenants/{tenant}/agents/{agent}/conversations/{id}",
  summary: "Read a conversation: status, transcript, usage, busy time, approval cards",
  params: conversationReadParams,
  responses: { 200: { description: "The conversation.", schema: conversationView }, ...errors(400, 404) },
} satisfies RouteDoc;

/** The routes the Agents API itself serves (the bridges' admin routes and the document's own are added by worker.ts). */
export const agentsApiDocs: RouteDoc[] = [...agentRouteDocs, sendMessage, readOne, ...conversationRouteDocs, ...settingRouteDocs, ...usageRouteDocs, ...accessRouteDocs, ...objectCallRouteDocs];

/** The Agents API over the given plugins (for inspecting mounts). */
export function agentsApi(deps: RuntimeDeps): Hono<{ Bindings: Env }> {
  const api = new Hono<{ Bindings: Env }>();

  api.use("*", accessGate);
  accessRoutes(api);

  serve(api, sendMessage, async (c, { params, body }) => {
    const conversation = body.conversation ?? `api-${crypto.randomUUID()}`;
    const id = c.req.header("idempotency-key") ?? crypto.randomUUID();
    const user = { platform: "api" as const, id: "admin" };
    const base = { id: `api:${id}`, conversation, user };
    const event =
      body.kind === "interrupt"
        ? { ...base, kind: body.kind }
        : body.kind === "command"
          ? { ...base, kind: body.kind, command: body.command }
          : { ...base, kind: body.kind, text: body.text, ...(body.attachments?.length ? { attachments: await readGivenFiles(body.attachments.map((file, i) => ({ at: `attachments[${i}]`, name: file.name, mimeType: file.type, data: fromBase64(file.data) }))) } : {}) };
    // A stop or a command is in the trail by the agent, with the change (runtime/object/audit-outbox.ts).
    markAudited(c);
    return c.json(await submitEvent(c.env, params, event, callerOf(c).actor), 202);
  });

  serve(api, readOne, async (c, { params }) => c.json(await readConversation(c.env, params, params.id)));

  agentRoutes(api, deps.plugins);
  conversationRoutes(api);
  settingRoutes(api, deps.plugins);
  usageRoutes(api);
  objectCallRoutes(api);
  return api;
}

// The generic signed webhook bridge: any chat system POSTs signed JSON events to
// /webhook/{tenant}/events and receives replies, signed the same way, at the
// callback_url registered for the tenant (PUT /v1/webhook/tenants/{tenant}).
import { Hono } from "hono";
import * as z from "zod";
import { HttpError } from "../../lib/http.ts";
import type { RouteDoc } from "../../lib/route-doc.ts";
import { errors, serve } from "../../lib/serve-route.ts";
import { listAgents, tenantParams } from "../../runtime/index.ts";
import type { ChatBridge } from "../shared/bridge.ts";
import { callbackFor, registerCallback, registrationSchema, unregisterCallback } from "./callbacks.ts";
import { handleEvent } from "./ingress.ts";
import { webhookOutbound } from "./outbound.ts";
import { secretRouteDocs, secretRoutes } from "./secret-routes.ts";

const routes = new Hono<{ Bindings: Env }>();
routes.post("/:tenant/events", handleEvent);

/** Served under /v1 behind the Agents API's access gate (runtime/access), as described (lib/route-doc.ts). */
const admin = new Hono<{ Bindings: Env }>();
const registration = z.object({ tenant: z.string(), callback_url: z.string() });

const register = {
  method: "put",
  path: "/webhook/tenants/{tenant}",
  summary: "Register the tenant's callback_url: where the webhook bridge delivers its agents' replies, signed",
  params: tenantParams,
  body: registrationSchema.meta({ examples: [{ callback_url: "https://chat.example.com/antiproton" }] }),
  responses: { 200: { description: "Registered.", schema: registration }, ...errors(400, 409, 413, 415) },
} satisfies RouteDoc;

const read = {
  method: "get",
  path: "/webhook/tenants/{tenant}",
  summary: "The tenant's registered callback_url",
  params: tenantParams,
  responses: { 200: { description: "The registration.", schema: registration }, ...errors(400, 404) },
} satisfies RouteDoc;

const unregister = {
  method: "delete",
  path: "/webhook/tenants/{tenant}",
  summary: "Remove the tenant's callback_url",
  params: tenantParams,
  responses: { 204: { description: "Removed." }, ...errors(400, 404) },
} satisfies RouteDoc;

serve(admin, register, async (c, { params: { tenant }, body }) => {
  // A tenant another bridge brought belongs to it: its replies never go to a callback.
  const other = (await listAgents(c.env, tenant)).find((a) => a.platform !== null && a.platform !== "webhook" && a.platform !== "api" && a.platform !== "console");
  if (other) throw new HttpError(409, `tenant "${tenant}" belongs to the ${other.platform} bridge; choose another tenant name for the webhook`);
  await registerCallback(c.env, tenant, body);
  return c.json({ tenant, ...body });
});

serve(admin, read, async (c, { params: { tenant } }) => {
  const found = await callbackFor(c.env, tenant);
  if (!found) throw new HttpError(404, `no callback_url registered for tenant "${tenant}"`);
  return c.json({ tenant, ...found });
});

serve(admin, unregister, async (c, { params: { tenant } }) => {
  if (!(await unregisterCallback(c.env, tenant))) throw new HttpError(404, `no callback_url registered for tenant "${tenant}"`);
  return c.body(null, 204);
});

secretRoutes(admin);

export const webhook: ChatBridge = { path: "/webhook", routes, outbound: webhookOutbound, admin: { routes: admin, docs: [register, read, unregister, ...secretRouteDocs] } };

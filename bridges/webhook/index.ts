// The generic signed webhook bridge: any chat system POSTs signed JSON events to
// /webhook/{tenant}/events and receives replies, signed the same way, at the
// callback_url registered for the tenant (PUT /v1/webhook/tenants/{tenant}).
import { Hono, type Context } from "hono";
import * as z from "zod";
import { HttpError, parseJson, readBody } from "../../lib/http.ts";
import { listAgents, parseRoute } from "../../runtime/index.ts";
import type { ChatBridge } from "../shared/bridge.ts";
import { callbackFor, registerCallback, registrationSchema, unregisterCallback } from "./callbacks.ts";
import { DEFAULT_AGENT } from "./config.ts";
import { handleEvent } from "./ingress.ts";
import { webhookOutbound } from "./outbound.ts";
import { secretRoutes } from "./secret-routes.ts";

const routes = new Hono<{ Bindings: Env }>();
routes.post("/:tenant/events", handleEvent);

/** Mounted at /v1/webhook behind the Agents API's access gate (runtime/access). */
const admin = new Hono<{ Bindings: Env }>();

/** parseRoute holds the one rule for tenant names; the agent part does not matter here. */
const tenantParam = (c: Context) => parseRoute(c.req.param("tenant") ?? "", DEFAULT_AGENT).tenant;

admin.put("/tenants/:tenant", async (c) => {
  const tenant = tenantParam(c);
  const raw = await readBody(c, { contentTypes: ["application/json"], maxBytes: 4096 });
  const parsed = registrationSchema.safeParse(parseJson(raw));
  if (!parsed.success) throw new HttpError(422, z.prettifyError(parsed.error));
  // A tenant another bridge brought belongs to it: its replies never go to a callback.
  const other = (await listAgents(c.env, tenant)).find((a) => a.platform !== null && a.platform !== "webhook" && a.platform !== "api" && a.platform !== "console");
  if (other) throw new HttpError(409, `tenant "${tenant}" belongs to the ${other.platform} bridge; choose another tenant name for the webhook`);
  await registerCallback(c.env, tenant, parsed.data);
  return c.json({ tenant, ...parsed.data });
});

admin.get("/tenants/:tenant", async (c) => {
  const tenant = tenantParam(c);
  const registration = await callbackFor(c.env, tenant);
  if (!registration) throw new HttpError(404, `no callback_url registered for tenant "${tenant}"`);
  return c.json({ tenant, ...registration });
});

admin.delete("/tenants/:tenant", async (c) => {
  const tenant = tenantParam(c);
  if (!(await unregisterCallback(c.env, tenant))) throw new HttpError(404, `no callback_url registered for tenant "${tenant}"`);
  return c.body(null, 204);
});

secretRoutes(admin, tenantParam);

export const webhook: ChatBridge = { path: "/webhook", routes, outbound: webhookOutbound, admin };

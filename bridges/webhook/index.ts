// The generic signed webhook bridge: any chat system POSTs signed JSON events to
// /webhook/{tenant}/events and receives replies, signed the same way, at the
// callback_url registered for the tenant (PUT /v1/webhook/tenants/{tenant}).
import { Hono, type Context } from "hono";
import { z } from "zod";
import { parseDecisionValue } from "../../approvals/index.ts";
import { secretNamed } from "../../lib/config.ts";
import { HttpError, parseJson, readBody } from "../../lib/http.ts";
import { CONVERSATION_ID, parseRoute, submitEvent, type ChatEvent } from "../../runtime/index.ts";
import type { ChatBridge } from "../index.ts";
import { readSignedBody } from "../shared/signed-request.ts";
import { callbackFor, cardJson, registerCallback, registrationSchema, unregisterCallback, webhookOutbound } from "./callbacks.ts";

const MAX_BODY_BYTES = 64 * 1024;
const DEFAULT_AGENT = "assistant";

const base = {
  /** Must equal the URL's tenant: it is inside the signed body, so a signed event cannot be replayed to another tenant. */
  tenant: z.string(),
  /** The sender's id for this event: a retry of one event carries the same key. */
  idempotency_key: z.string().min(1).max(200),
  conversation: z.string().regex(CONVERSATION_ID, "conversation: letters, digits, : . _ - (max 200)"),
  user: z.object({ id: z.string().min(1).max(200), name: z.string().max(200).optional() }),
  /** Which of the tenant's agents; WEBHOOK_AGENT when absent. */
  agent: z.string().optional(),
};
const text = z.string().trim().min(1, "text must not be empty").max(32_000);

const eventSchema = z.discriminatedUnion("type", [
  z.object({ ...base, type: z.literal("message"), text }),
  z.object({ ...base, type: z.literal("steer"), text }),
  z.object({ ...base, type: z.literal("interrupt") }),
  z.object({ ...base, type: z.literal("command"), command: z.enum(["stop", "compact", "status"]) }),
  /** `value`: the chosen action's value from a card the bridge POSTed. */
  z.object({ ...base, type: z.literal("decision"), value: z.string().refine((v) => parseDecisionValue(v) !== null, "value is not a card action's value") }),
]);
type WebhookEvent = z.infer<typeof eventSchema>;

function chatEvent(event: WebhookEvent, tenant: string): ChatEvent {
  const common = {
    id: `webhook:${event.idempotency_key}`,
    conversation: event.conversation,
    user: { platform: "webhook" as const, id: event.user.id, name: event.user.name },
    replyTo: { platform: "webhook" as const, target: { tenant } },
  };
  switch (event.type) {
    case "message":
    case "steer":
      return { ...common, kind: event.type, text: event.text };
    case "interrupt":
      return { ...common, kind: "interrupt" };
    case "command":
      return { ...common, kind: "command", command: event.command };
    case "decision": {
      const decision = parseDecisionValue(event.value)!;
      return { ...common, kind: "decision", holdId: decision.holdId, approve: decision.approve, boundTo: { tenant: decision.tenant, agent: decision.agent } };
    }
  }
}

const routes = new Hono<{ Bindings: Env }>();

routes.post("/:tenant/events", async (c) => {
  const secret = secretNamed(c.env, "WEBHOOK_SECRET");
  if (!secret) throw new HttpError(503, "WEBHOOK_SECRET is not configured");
  const raw = await readSignedBody(c, secret, { contentTypes: ["application/json"], maxBytes: MAX_BODY_BYTES });
  const parsed = eventSchema.safeParse(parseJson(raw));
  if (!parsed.success) throw new HttpError(422, z.prettifyError(parsed.error));
  const tenant = c.req.param("tenant");
  if (parsed.data.tenant !== tenant) throw new HttpError(403, `the signed event is for tenant "${parsed.data.tenant}", not "${tenant}"`);
  const route = parseRoute(tenant, parsed.data.agent ?? (c.env.WEBHOOK_AGENT?.trim() || DEFAULT_AGENT));
  // Replies would have nowhere to go: refuse before anything is written.
  if (!(await callbackFor(c.env, tenant))) throw new HttpError(409, `no callback_url registered for tenant "${tenant}"`);
  const { card, ...result } = await submitEvent(c.env, route, chatEvent(parsed.data, tenant));
  return c.json({ ...result, ...(card ? { card: cardJson(card) } : {}) }, result.accepted ? 202 : 200);
});

/** Mounted at /v1/webhook behind ADMIN_TOKEN. */
const admin = new Hono<{ Bindings: Env }>();

/** parseRoute holds the one rule for tenant names; the agent part does not matter here. */
const tenantParam = (c: Context) => parseRoute(c.req.param("tenant") ?? "", DEFAULT_AGENT).tenant;

admin.put("/tenants/:tenant", async (c) => {
  const tenant = tenantParam(c);
  const raw = await readBody(c, { contentTypes: ["application/json"], maxBytes: 4096 });
  const parsed = registrationSchema.safeParse(parseJson(raw));
  if (!parsed.success) throw new HttpError(422, z.prettifyError(parsed.error));
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

export const webhook: ChatBridge = { path: "/webhook", routes, outbound: webhookOutbound, admin };

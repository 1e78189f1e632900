// Conversations and holds through the Agents API: a tenant's and an agent's
// conversations (newest first, a page at a time), cancelling a running turn,
// deleting a conversation, and the holds waiting for a decision, decided as a
// named approver (the agent checks APPROVERS, as for a click in chat).
import type { Hono } from "hono";
import * as z from "zod";
import { HttpError } from "../../lib/http.ts";
import type { RouteDoc } from "../../lib/route-doc.ts";
import { errors, serve } from "../../lib/serve-route.ts";
import { callerOf, markAudited } from "../access/index.ts";
import { listAgents } from "../control/index.ts";
import { agentStub, type ConversationSummary, type PageCursor } from "../object/index.ts";
import type { Route } from "../chat.ts";
import { submitEvent } from "./ingress.ts";
import { agentParams, card, conversationParams, conversationSummary, holdParams, submitResult, tenantParams } from "./schemas.ts";

/** A platform's name: a bridge's (as its outbound names it), or `api` and `console`, the runtime's own. */
const PLATFORM = "[a-z][a-z0-9-]{0,31}";
/** The tenant-wide list asks at most this many agents, in parallel. */
const TENANT_FANOUT = 200;

/** `after`: the `next` of the page before, `<updatedAt>~<id>` (`<updatedAt>~<agent>~<id>` in a tenant's list: no name or id holds a ~). */
const pageQuery = z
  .object({
    limit: z.coerce.number().int().min(1).max(100).default(25),
    after: z.string().regex(/^\d{1,16}~[^~]+(~[^~]+)?$/, "after: the next cursor of the page before").optional(),
  })
  .strict();

const page = (item: z.ZodType) => z.object({ conversations: z.array(item), next: z.string().optional().meta({ description: "The next page's after." }) });

const listOfAgent = {
  method: "get",
  path: "/tenants/{tenant}/agents/{agent}/conversations",
  summary: "An agent's conversations, newest first, a page at a time",
  params: agentParams,
  query: pageQuery,
  responses: { 200: { description: "A page.", schema: page(conversationSummary) }, ...errors(400) },
} satisfies RouteDoc;

const listOfTenant = {
  method: "get",
  path: "/tenants/{tenant}/conversations",
  summary: "A tenant's conversations across its agents, newest first, a page at a time",
  params: tenantParams,
  query: pageQuery,
  responses: { 200: { description: "A page.", schema: page(conversationSummary.extend({ agent: z.string() })) }, ...errors(400) },
} satisfies RouteDoc;

const cancel = {
  method: "post",
  path: "/tenants/{tenant}/agents/{agent}/conversations/{id}/cancel",
  summary: "Cancel the running turn",
  params: conversationParams,
  responses: { 200: { description: "What the agent did.", schema: submitResult }, ...errors(400, 404) },
} satisfies RouteDoc;

const remove = {
  method: "delete",
  path: "/tenants/{tenant}/agents/{agent}/conversations/{id}",
  summary: "Delete a conversation with nothing running or waiting",
  params: conversationParams,
  responses: { 204: { description: "Deleted." }, ...errors(400, 404, 409) },
} satisfies RouteDoc;

const person = z.object({ platform: z.string().regex(new RegExp(`^${PLATFORM}$`), "platform: a bridge's name (lower-case letters, digits, -) or api or console"), id: z.string().min(1).max(200), name: z.string().max(200).optional() });
const holdsQuery = z
  .object({
    approver: z
      .string()
      .regex(new RegExp(`^${PLATFORM}:.+$`), "approver: <platform>:<user id>")
      .optional()
      .meta({ description: "Only holds this person may decide, e.g. slack:U123." }),
  })
  .strict();
const pending = z.object({ conversation: z.string(), createdAt: z.number(), card });

const listHolds = {
  method: "get",
  path: "/tenants/{tenant}/agents/{agent}/holds",
  summary: "Holds waiting for a decision, oldest first",
  params: agentParams,
  query: holdsQuery,
  responses: { 200: { description: "The holds.", schema: z.object({ holds: z.array(pending) }) }, ...errors(400) },
} satisfies RouteDoc;

const decideHold = {
  method: "post",
  path: "/tenants/{tenant}/agents/{agent}/holds/{holdId}",
  summary: "Approve or deny a hold as an approver (APPROVERS, or the person who asked)",
  params: holdParams,
  body: z
    .object({ approve: z.boolean(), approver: person.default({ platform: "api", id: "admin" }) })
    .strict()
    .meta({ examples: [{ approve: true, approver: { platform: "api", id: "U123" } }] }),
  responses: { 200: { description: "Decided.", schema: submitResult }, ...errors(400, 403, 404, 413, 415) },
} satisfies RouteDoc;

export const conversationRouteDocs: RouteDoc[] = [listOfTenant, listOfAgent, cancel, remove, listHolds, decideHold];

function cursorOf(after: string | undefined): { updatedAt: number; parts: string[] } | undefined {
  if (after === undefined) return undefined;
  const [updatedAt, ...parts] = after.split("~");
  return { updatedAt: Number(updatedAt), parts };
}

/** Newest first across agents: ties on time go by agent, then id, both descending. */
async function tenantPage(env: Env, tenant: string, limit: number, after?: { updatedAt: number; agent: string; id: string }) {
  const agents = (await listAgents(env, tenant)).slice(0, TENANT_FANOUT);
  // Each agent's own cursor: after a later agent's rows at that instant, an earlier agent starts at the instant itself.
  const cursorFor = (agent: string): PageCursor | undefined =>
    !after ? undefined : agent === after.agent ? after : agent > after.agent ? { updatedAt: after.updatedAt, id: "" } : { updatedAt: after.updatedAt + 1, id: "" };
  const pages = await Promise.all(agents.map(async (a) => ({ agent: a.agent, page: await agentStub(env, a).conversationList(a, { after: cursorFor(a.agent), limit }) })));
  const rows = pages.flatMap(({ agent, page }) => page.conversations.map((conv) => ({ ...conv, agent })));
  rows.sort((x, y) => y.updatedAt - x.updatedAt || (y.agent > x.agent ? 1 : y.agent < x.agent ? -1 : 0) || (y.id > x.id ? 1 : y.id < x.id ? -1 : 0));
  const shown = rows.slice(0, limit);
  const last = shown.at(-1);
  const more = rows.length > limit || pages.some(({ page }) => page.next !== undefined);
  return { conversations: shown, ...(more && last ? { next: `${last.updatedAt}~${last.agent}~${last.id}` } : {}) };
}

async function holdConversation(env: Env, route: Route, holdId: string, approver: z.output<typeof person>): Promise<string> {
  const stub = agentStub(env, route);
  const hold = (await stub.pendingHolds(route)).find((h) => h.card.holdId === holdId);
  if (!hold) throw new HttpError(404, `no hold "${holdId}" waiting for a decision`);
  const mayDecide = (await stub.pendingHolds(route, approver)).some((h) => h.card.holdId === holdId);
  if (!mayDecide) throw new HttpError(403, `${approver.platform}:${approver.id} may not decide hold "${holdId}": not in APPROVERS for tenant ${route.tenant}, and not who asked`);
  return hold.conversation;
}

export function conversationRoutes(api: Hono<{ Bindings: Env }>): void {
  serve(api, listOfAgent, async (c, { params, query }) => {
    const after = cursorOf(query.after);
    if (after && after.parts.length !== 1) throw new HttpError(400, "bad query: after: the next cursor of the page before (<updatedAt>~<id>)");
    const result = await agentStub(c.env, params).conversationList(params, { limit: query.limit, after: after && { updatedAt: after.updatedAt, id: after.parts[0]! } });
    return c.json({ conversations: result.conversations satisfies ConversationSummary[], ...(result.next ? { next: `${result.next.updatedAt}~${result.next.id}` } : {}) });
  });

  serve(api, listOfTenant, async (c, { params, query }) => {
    const after = cursorOf(query.after);
    if (after && after.parts.length !== 2) throw new HttpError(400, "bad query: after: the next cursor of the page before (<updatedAt>~<agent>~<id>)");
    const cursor = after && { updatedAt: after.updatedAt, agent: after.parts[0]!, id: after.parts[1]! };
    return c.json(await tenantPage(c.env, params.tenant, query.limit, cursor));
  });

  serve(api, cancel, async (c, { params }) => {
    const event = { id: `api:${c.req.header("idempotency-key") ?? crypto.randomUUID()}`, kind: "interrupt" as const, conversation: params.id, user: { platform: "api" as const, id: "admin" } };
    markAudited(c); // by the agent, with the stop
    return c.json(await submitEvent(c.env, params, event, callerOf(c).actor));
  });

  serve(api, remove, async (c, { params }) => {
    const outcome = await agentStub(c.env, params).deleteConversation(params, params.id);
    if (outcome === "missing") throw new HttpError(404, `no conversation "${params.id}" for agent ${params.agent} of tenant ${params.tenant}`);
    if (outcome === "busy") throw new HttpError(409, `conversation "${params.id}" has a turn, a send or a hold open: cancel it (POST .../cancel) or wait, then delete`);
    return c.body(null, 204);
  });

  serve(api, listHolds, async (c, { params, query }) => {
    const approver = query.approver ? { platform: query.approver.split(":")[0]!, id: query.approver.slice(query.approver.indexOf(":") + 1) } : undefined;
    const holds = await agentStub(c.env, params).pendingHolds(params, approver);
    return c.json({ holds: holds.map((h) => ({ conversation: h.conversation, createdAt: h.createdAt, card: h.card })) });
  });

  serve(api, decideHold, async (c, { params, body }) => {
    const conversation = await holdConversation(c.env, params, params.holdId, body.approver);
    const event = {
      id: `api:${c.req.header("idempotency-key") ?? crypto.randomUUID()}`,
      kind: "decision" as const,
      conversation,
      holdId: params.holdId,
      approve: body.approve,
      boundTo: { tenant: params.tenant, agent: params.agent },
      user: body.approver,
    };
    markAudited(c); // by the agent, with the decision
    return c.json(await submitEvent(c.env, params, event, callerOf(c).actor));
  });
}

// The OpenAI Responses API over our agents (`model` = "<tenant>/<agent>", a
// response = one turn of one of our conversations), and the Agents API's
// follow of a conversation as Server-Sent Events. Both read the agent's feed
// (runtime/feed) and hear what is written next from its object (follow.ts);
// the object keeps the responses, so the Worker stays stateless and a restart
// loses none. A
// response's stream also hears its reply's text as the model writes it
// (response-stream.ts).
import { type Context, Hono } from "hono";
import * as z from "zod";
import type { RouteDoc } from "../../lib/route-doc.ts";
import { fromBase64Url, toBase64Url } from "../../lib/base64.ts";
import { HttpError, sha256Hex } from "../../lib/http.ts";
import { API_MAX_BODY_BYTES, readJsonBody } from "../../lib/serve-route.ts";
import type { ChatUser, Route } from "../chat.ts";
import { CONVERSATION_ID, conversationId, FILES_MAX_CHARS, restoredError, parseRoute } from "../edge/index.ts";
import type { FeedEvent, ResponseRefusal, ResponseState } from "../feed/index.ts";
import { type Caller, callerOf, requireTenant } from "../access/index.ts";
import { agentStub } from "../object/index.ts";
import { ANSWER_ITEMS, callerTools, functionsOf, responseEvents, responseInput } from "./input.ts";
import { responseObject } from "./openai.ts";
import { settledResponse, streamResponse } from "./response-stream.ts";
import { followFeed, listenToText, sseResponse } from "./follow.ts";

/** How long a plain create waits for its turn before answering it in progress (the caller polls then). */
const PLAIN_WAIT_MS = 5 * 60_000;
/** How long one stream stays open: a response's stream, a follower's (who reconnects with Last-Event-ID). */
const STREAM_MS = 15 * 60_000;

/** A create's body: its text as any /v1 body, and the files of its input inline (a picture as a data: URL), as many as one message may bring. */
const RESPONSE_MAX_BODY_BYTES = API_MAX_BODY_BYTES + FILES_MAX_CHARS;

/** A response id names its agent, so any Worker finds the object that keeps it: resp_<base64url "tenant/agent">_<32 hex>. */
const RESPONSE_ID = /^resp_([A-Za-z0-9_-]+)_([0-9a-f]{32})$/;

/** Who calls through the API, as the agent sees them: `api:admin` for the platform's token, `api:key:<id>` for a key (who asked, for a held call; an approver in APPROVERS). */
function userOf(caller: Caller): ChatUser {
  return { platform: "api", id: caller.kind === "key" ? caller.actor : "admin" };
}

/** A new response's id; with an Idempotency-Key, the same one each time it is sent (a retry is the same response). */
async function newResponseId(route: Route, idempotencyKey: string | undefined): Promise<string> {
  const name = toBase64Url(new TextEncoder().encode(`${route.tenant}/${route.agent}`));
  const hex = idempotencyKey ? (await sha256Hex(`${route.tenant}/${route.agent}\n${idempotencyKey}`)).slice(0, 32) : crypto.randomUUID().replaceAll("-", "");
  return `resp_${name}_${hex}`;
}

function routeOfResponse(id: string): Route {
  const name = RESPONSE_ID.exec(id)?.[1];
  const [tenant = "", agent = ""] = name ? new TextDecoder().decode(fromBase64Url(name)).split("/") : [];
  if (!tenant || !agent) throw new HttpError(404, `no response "${id}": response ids look like resp_<agent>_<32 hex>`);
  return parseRoute(tenant, agent);
}

export const createResponseBody = z
  .object({
    model: z.string({ error: 'model is required: "<tenant>/<agent>"' }).min(1).meta({ description: "<tenant>/<agent>; with a key scoped to one agent, any model name means that agent." }),
    input: responseInput,
    conversation: z.union([conversationId(), z.object({ id: conversationId() })]).optional(),
    previous_response_id: z.string().regex(RESPONSE_ID, "previous_response_id: an id this API answered (resp_…)").optional(),
    background: z.boolean().default(false),
    stream: z.boolean().default(false),
    metadata: z.record(z.string(), z.string().max(512)).default({}),
    tools: callerTools,
  })
  // Sampling parameters and tools other than functions are the agent's own settings: given ones are ignored, as docs/openai.md says.
  .loose()
  .refine((body) => !(body.conversation && body.previous_response_id), "give conversation or previous_response_id, not both")
  .refine(
    (body) => typeof body.input === "string" || !body.input.some((item) => ANSWER_ITEMS.has(item.type ?? "message")) || body.conversation || body.previous_response_id,
    "an mcp_approval_response or function_call_output answers what the agent asked in one conversation: give previous_response_id (or conversation) with it",
  )
  .meta({ examples: [{ model: "demo/helper", input: "What time is it?", background: true }] });

const responseSchema = z.object({ id: z.string(), object: z.literal("response"), status: z.string(), output: z.array(z.looseObject({ type: z.string() })), output_text: z.string() }).loose();
const errorSchema = z.object({ error: z.object({ message: z.string(), type: z.string() }).loose() });
const idParams = z.object({ id: z.string() });
const followParams = z.object({ tenant: z.string(), agent: z.string(), id: z.string() });
const followQuery = z.object({ after: z.string().regex(/^\d+$/).optional() });
/** GET /responses/{id}: `stream=true` sends its events again, those after `starting_after` (a sequence number its client had). */
const retrieveQuery = z
  .object({
    stream: z.enum(["true", "false"], "stream: true or false").optional(),
    starting_after: z.string().regex(/^\d{1,9}$/, "starting_after: the sequence number of the last event the client had").optional(),
  })
  .loose();
const oaiError = (description: string) => ({ description, schema: errorSchema });

export const responsesRouteDocs: RouteDoc[] = [
  {
    method: "post",
    path: "/responses",
    summary: "OpenAI Responses API: a message to the agent `model` names; answers when its turn ends, at once (background), or as the Responses event stream",
    body: createResponseBody,
    responses: {
      200: { description: "the response (or, with stream, its events)", schema: responseSchema },
      400: oaiError("bad request, or a function call left without its output"),
      403: oaiError("an mcp_approval_response the caller may not give"),
      404: oaiError("no such previous response, approval request or function call"),
      409: oaiError("an approval request decided, or a function call given its output, already"),
    },
  },
  {
    method: "get",
    path: "/responses/{id}",
    summary: "A response as it stands (poll a background one); with stream=true, its event stream again, after starting_after",
    params: idParams,
    query: retrieveQuery,
    responses: {
      200: { description: "the response (or, with stream, its events)", schema: responseSchema },
      400: oaiError("bad stream or starting_after"),
      404: oaiError("no such response"),
    },
  },
  {
    method: "post",
    path: "/responses/{id}/cancel",
    summary: "Stops the turn a response waits for, if it still runs",
    params: idParams,
    responses: { 200: { description: "the response, cancelled if it was running", schema: responseSchema }, 404: oaiError("no such response") },
  },
  {
    method: "get",
    path: "/tenants/{tenant}/agents/{agent}/conversations/{id}/events",
    summary: "Follow a conversation as Server-Sent Events (message, tool_result, hold, status, awaiting, done); resume with Last-Event-ID or ?after=",
    params: followParams,
    query: followQuery,
    responses: { 200: { description: "the event stream", contentType: "text/event-stream" }, 400: { description: "bad id or cursor" }, 404: { description: "no such conversation" } },
  },
];

async function readResponse(env: Env, route: Route, id: string): Promise<ResponseState> {
  const state = await agentStub(env, route).response(route, id);
  if (!state) throw new HttpError(404, `no response "${id}"`);
  return state;
}

/** The agent `model` names ("<tenant>/<agent>"), or the one the caller's key is scoped to; the caller must reach it. */
function routeOfModel(c: Context<{ Bindings: Env }>, model: string): Route {
  const named = /^([^/]+)\/([^/]+)$/.exec(model);
  const caller = callerOf(c);
  const scoped = caller.kind === "key" && caller.agent !== null ? { tenant: caller.tenant, agent: caller.agent } : null;
  if (!named && !scoped) throw new HttpError(400, 'model: "<tenant>/<agent>"');
  const route = named ? parseRoute(named[1]!, named[2]!) : scoped!;
  requireTenant(c, route.tenant, { write: true, agent: route.agent });
  return route;
}

/** Whether a request is the Responses API's (worker.ts mounts these routes under /v1): its errors are said in OpenAI's shape. */
export function isResponsesPath(path: string): boolean {
  return /^\/v1\/responses(\/|$)/.test(path);
}

/** The Responses API and the follow route. */
export function responsesRoutes(): Hono<{ Bindings: Env }> {
  const app = new Hono<{ Bindings: Env }>();

  app.post("/responses", async (c) => {
    const body = await readJsonBody(c, createResponseBody, RESPONSE_MAX_BODY_BYTES);
    const route = routeOfModel(c, body.model);
    let conversation = typeof body.conversation === "string" ? body.conversation : body.conversation?.id;
    if (body.previous_response_id) {
      const previous = routeOfResponse(body.previous_response_id);
      if (previous.tenant !== route.tenant || previous.agent !== route.agent) throw new HttpError(400, `previous_response_id belongs to ${previous.tenant}/${previous.agent}, not to model ${body.model}`);
      conversation = (await readResponse(c.env, route, body.previous_response_id)).conversation;
    }
    const id = await newResponseId(route, c.req.header("idempotency-key"));
    const tools = functionsOf(body.tools);
    const request = { model: body.model, background: body.background, previousResponseId: body.previous_response_id ?? null, metadata: body.metadata, ...(tools.length > 0 ? { tools } : {}) };
    const caller = callerOf(c);
    const events = await responseEvents(c.env, route, id, conversation ?? `api-${crypto.randomUUID()}`, userOf(caller), body.input);
    let answer: ResponseState | ResponseRefusal | null;
    try {
      answer = await agentStub(c.env, route).respond(route, id, events, request, caller.actor);
    } catch (err) {
      throw restoredError(err);
    }
    if (!answer) throw new HttpError(409, "the message was not accepted; send it again");
    if ("refused" in answer) throw new HttpError(answer.refused.status, answer.refused.message);
    let state = answer;
    if (body.stream) return streamResponse(c.env, route, state, () => readResponse(c.env, route, id), STREAM_MS);
    if (!body.background) state = await settledResponse(c.env, route, state, () => readResponse(c.env, route, id), PLAIN_WAIT_MS);
    return c.json(responseObject(state));
  });

  app.get("/responses/:id", async (c) => {
    const id = c.req.param("id");
    const route = routeOfResponse(id);
    requireTenant(c, route.tenant, { write: false, agent: route.agent });
    const query = retrieveQuery.safeParse(c.req.query());
    if (!query.success) throw new HttpError(400, query.error.issues.map((issue) => issue.message).join("; "));
    const state = await readResponse(c.env, route, id);
    if (query.data.stream !== "true") return c.json(responseObject(state));
    const startingAfter = query.data.starting_after === undefined ? -1 : Number(query.data.starting_after);
    return streamResponse(c.env, route, state, () => readResponse(c.env, route, id), STREAM_MS, startingAfter);
  });

  app.post("/responses/:id/cancel", async (c) => {
    const id = c.req.param("id");
    const route = routeOfResponse(id);
    requireTenant(c, route.tenant, { write: true, agent: route.agent });
    const state = await agentStub(c.env, route).cancelResponse(route, id, userOf(callerOf(c)));
    if (!state) throw new HttpError(404, `no response "${id}"`);
    return c.json(responseObject(state));
  });

  app.get("/tenants/:tenant/agents/:agent/conversations/:id/events", async (c) => {
    const route = parseRoute(c.req.param("tenant"), c.req.param("agent"));
    const conversation = c.req.param("id");
    if (!CONVERSATION_ID.test(conversation)) throw new HttpError(400, "invalid conversation id");
    // An empty Last-Event-ID (a client that has seen nothing yet) is no cursor.
    const cursor = c.req.header("last-event-id")?.trim() || c.req.query("after") || "0";
    if (!/^\d{1,15}$/.test(cursor)) throw new HttpError(400, `invalid event id "${cursor}": Last-Event-ID (or ?after=) is the id of the last event seen`);
    const stub = agentStub(c.env, route);
    let page = await stub.feed(route, conversation, Number(cursor));
    if (!page) throw new HttpError(404, `no conversation "${conversation}" for agent ${route.agent} of tenant ${route.tenant}`);
    return sseResponse(async (sink) => {
      // A model call's text as it is written, between the events, while a turn runs (its events say so): a
      // text_delta has no id (it is not kept); the message of the same calledAt is the whole text.
      let listening = null as { stop(): void } | null;
      const send = async (event: FeedEvent) => {
        await sink.send({ id: event.id, event: event.type, data: event });
        if (event.type === "done") {
          listening?.stop();
          listening = null;
        } else if (event.type !== "hold" && !listening) {
          listening = listenToText(c.env, route, conversation, (piece) => sink.send({ event: "text_delta", data: piece }));
        }
      };
      // What the feed holds now (an archived conversation's from its archive), a page at a time; then what is written next, as it is.
      let after = Number(cursor);
      const feed = await (async () => {
        for (; page; page = page.more ? await stub.feed(route, conversation, after) : null) {
          for (const event of page.events) await send(event);
          after = page.last;
        }
        return followFeed(c.env, route, conversation, after, sink.gone);
      })();
      try {
        const until = Date.now() + STREAM_MS;
        for (let events = await feed.next(until); events; events = await feed.next(until)) {
          for (const event of events) await send(event);
        }
      } finally {
        listening?.stop();
        feed.close();
      }
    });
  });
  return app;
}

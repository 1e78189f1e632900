// The Slack bridge: Events API, slash command and interactivity over HTTP,
// the Socket Mode connector's forward route, OAuth install, and the outbound.
import { Hono } from "hono";
import { HttpError, parseJson } from "../../lib/http.ts";
import type { ChatBridge } from "../shared/bridge.ts";
import { handleCommand, handleEvent, handleInteraction, type Defer } from "./ingress.ts";
import { callback, install } from "./oauth.ts";
import { slackOutbound } from "./outbound.ts";
import { readForwardBody, readSlackBody } from "./verify.ts";

const JSON_BODY = { contentTypes: ["application/json"], maxBytes: 1 << 20 };
const FORM_BODY = { contentTypes: ["application/x-www-form-urlencoded"], maxBytes: 256 * 1024 };

function interactionPayload(form: URLSearchParams): unknown {
  const payload = form.get("payload");
  if (payload === null) throw new HttpError(400, "interactivity request without a payload field");
  return parseJson(payload);
}

const routes = new Hono<{ Bindings: Env }>();

routes.post("/events", async (c) => {
  const raw = await readSlackBody(c, JSON_BODY);
  const defer: Defer = (work) => c.executionCtx.waitUntil(work);
  return c.json(await handleEvent(c.env, parseJson(raw), defer));
});

routes.post("/commands", async (c) => {
  const raw = await readSlackBody(c, FORM_BODY);
  return c.json(await handleCommand(c.env, new URLSearchParams(raw)));
});

routes.post("/interactivity", async (c) => {
  const raw = await readSlackBody(c, FORM_BODY);
  const defer: Defer = (work) => c.executionCtx.waitUntil(work);
  return c.json(await handleInteraction(c.env, interactionPayload(new URLSearchParams(raw)), defer));
});

/**
 * The Socket Mode connector (socket-mode.mjs) forwards what Slack sent it here,
 * signed with SLACK_SOCKET_FORWARD_SECRET: {kind, body}, where body is the
 * envelope's payload as Slack sent it. The answer is what the connector acks with.
 */
routes.post("/forward", async (c) => {
  const parsed = parseJson(await readForwardBody(c, JSON_BODY));
  if (typeof parsed !== "object" || parsed === null) throw new HttpError(400, "the forwarded body must be an object {kind, body}");
  const forwarded = parsed as { kind?: unknown; body?: unknown };
  const defer: Defer = (work) => c.executionCtx.waitUntil(work);
  switch (forwarded.kind) {
    case "events_api":
      return c.json(await handleEvent(c.env, forwarded.body, defer));
    case "slash_commands":
      return c.json(await handleCommand(c.env, new URLSearchParams(stringFields(forwarded.body))));
    case "interactive":
      return c.json(await handleInteraction(c.env, forwarded.body, defer));
    default:
      throw new HttpError(400, 'kind must be "events_api", "slash_commands" or "interactive"');
  }
});

/** Socket Mode delivers a slash command as an object; over HTTP it is a form. */
function stringFields(body: unknown): Record<string, string> {
  if (typeof body !== "object" || body === null) throw new HttpError(400, "a slash command body must be an object");
  return Object.fromEntries(Object.entries(body).map(([k, v]) => [k, typeof v === "string" ? v : JSON.stringify(v)]));
}

routes.get("/install", install);
routes.get("/oauth/callback", callback);

export const slack: ChatBridge = { path: "/slack", routes, outbound: slackOutbound };

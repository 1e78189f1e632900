// The Microsoft Teams bridge: the bot's Bot Framework messaging endpoint
// (every activity's token verified), replies through the Bot Connector.
import { Hono } from "hono";
import type { ChatBridge } from "../shared/bridge.ts";
import { handleActivity } from "./ingress.ts";
import { teamsOutbound } from "./outbound.ts";

const routes = new Hono<{ Bindings: Env }>();
routes.post("/api/messages", handleActivity);

export const teams: ChatBridge = { path: "/teams", routes, outbound: teamsOutbound };

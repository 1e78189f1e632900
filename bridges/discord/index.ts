// The Discord bridge: interactions (slash commands, buttons) from Discord, channel
// messages from the gateway connector, replies through the REST API.
import { Hono } from "hono";
import type { ChatBridge } from "../shared/bridge.ts";
import { handleGatewayMessage, handleInteraction } from "./ingress.ts";
import { discordOutbound } from "./outbound.ts";

const routes = new Hono<{ Bindings: Env }>();
routes.post("/interactions", handleInteraction);
routes.post("/gateway-events", handleGatewayMessage);

export const discord: ChatBridge = { path: "/discord", routes, outbound: discordOutbound };

// The Telegram bridge: each bot's Bot API webhook (one deployment serves
// several bots, each its own tenant), replies through the Bot API.
import { Hono } from "hono";
import type { ChatBridge } from "../shared/bridge.ts";
import { handleUpdate } from "./ingress.ts";
import { telegramOutbound } from "./outbound.ts";

const routes = new Hono<{ Bindings: Env }>();
routes.post("/:tenant/webhook", handleUpdate);

export const telegram: ChatBridge = { path: "/telegram", routes, outbound: telegramOutbound };

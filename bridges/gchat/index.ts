// The Google Chat bridge: the app's HTTP endpoint (each request carries a
// bearer JWT Chat signed), replies through the Chat API as its service account.
import { Hono } from "hono";
import type { ChatBridge } from "../shared/bridge.ts";
import { handleEvent } from "./ingress.ts";
import { gchatOutbound } from "./outbound.ts";

const routes = new Hono<{ Bindings: Env }>();
routes.post("/events", handleEvent);

export const gchat: ChatBridge = { path: "/gchat", routes, outbound: gchatOutbound };

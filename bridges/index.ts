// Every chat bridge the Worker serves: its routes and its outbound.
import type { Hono } from "hono";
import type { ChatOutbound } from "../runtime/index.ts";
import { discord } from "./discord/index.ts";
import { slack } from "./slack/index.ts";
import { webhook } from "./webhook/index.ts";

export interface ChatBridge {
  /** Where its routes are mounted, e.g. "/slack". */
  path: string;
  routes: Hono<{ Bindings: Env }>;
  outbound: ChatOutbound;
  /** Admin routes, mounted at /v1<path> behind ADMIN_TOKEN (e.g. registering a callback URL). */
  admin?: Hono<{ Bindings: Env }>;
}

export const bridges: ChatBridge[] = [discord, slack, webhook];

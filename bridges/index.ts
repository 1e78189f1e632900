// Every chat bridge the Worker serves: its routes and its outbound.
import type { Hono } from "hono";
import type { ChatOutbound } from "../runtime/index.ts";

export interface ChatBridge {
  /** Where its routes are mounted, e.g. "/slack". */
  path: string;
  routes: Hono<{ Bindings: Env }>;
  outbound: ChatOutbound;
}

export const bridges: ChatBridge[] = [];

// What every chat bridge is to the Worker: its routes and its outbound. A leaf
// below the bridges, so each bridge names it without importing the list of them.
import type { Hono } from "hono";
import type { ChatOutbound } from "../../runtime/index.ts";

export interface ChatBridge {
  /** Where its routes are mounted, e.g. "/slack". */
  path: string;
  routes: Hono<{ Bindings: Env }>;
  outbound: ChatOutbound;
  /** Admin routes, mounted at /v1<path> behind ADMIN_TOKEN (e.g. registering a callback URL). */
  admin?: Hono<{ Bindings: Env }>;
}

// What every chat bridge is to the Worker: its routes and its outbound. A leaf
// below the bridges, so each bridge names it without importing the list of them.
import type { Hono } from "hono";
import type { RouteDoc } from "../../lib/route-doc.ts";
import type { ChatOutbound } from "../../runtime/index.ts";

export interface ChatBridge {
  /** Where its routes are mounted, e.g. "/slack". */
  path: string;
  routes: Hono<{ Bindings: Env }>;
  outbound: ChatOutbound;
  /** Admin routes, served under /v1 behind ADMIN_TOKEN at the paths they describe (e.g. /webhook/tenants/{tenant}: registering a callback URL). */
  admin?: { routes: Hono<{ Bindings: Env }>; docs: RouteDoc[] };
}

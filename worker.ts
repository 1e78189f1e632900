// The composition root: the only file that imports bridges, console and
// runtime together. It hands the runtime its dependencies explicitly (each
// bridge's outbound, the plugins a mount may name) and serves the routes.
import { Hono, type Context } from "hono";
import type { ContentfulStatusCode } from "hono/utils/http-status";
import { bridges, type ChatBridge } from "./bridges/index.ts";
import { consoleRoutes, referenceRoutes } from "./console/index.ts";
export { ConsoleSession } from "./console/index.ts";
import { ConfigError } from "./lib/config.ts";
import { HttpError } from "./lib/http.ts";
import { migrationFailure } from "./lib/migrations.ts";
import { openApiDocument, type OpenApiDocument } from "./lib/openapi.ts";
import type { RouteDoc } from "./lib/route-doc.ts";
import { builtinPlugins, type Plugin } from "./plugins/index.ts";
import { agentsApi, agentsApiDocs, AgentObject as AgentCore, consumeQueue, Courier as CourierCore, foldLedgers, isResponsesPath, openAIErrorBody, responsesRouteDocs, responsesRoutes, type RuntimeDeps } from "./runtime/index.ts";

export { ControlPlane, Ledger, PersonRoles, ProviderGate, SendPace, Tenant } from "./runtime/index.ts";
// The Cloudflare machine backend's objects, and the entrypoint its outbound filtering goes through.
export { Machine, ContainerProxy } from "./machines/index.ts";

const describeDocument = {
  method: "get",
  path: "/openapi.json",
  summary: "This document (no token needed)",
  responses: { 200: { description: "The OpenAPI 3.1 document of /v1." } },
} satisfies RouteDoc;

let described: OpenApiDocument | undefined;

/** Every /v1 route, described: the Agents API's, the Responses API's and the follow, the bridges' admin routes, and this document's own. Built on first use, not at startup. */
export const apiDocument = (): OpenApiDocument =>
  (described ??= openApiDocument(
  [...agentsApiDocs, ...responsesRouteDocs, ...bridges.flatMap((b) => b.admin?.docs ?? [])],
  [describeDocument],
  "antiproton's agents without a chat platform. Errors: { \"error\": \"<what was wrong>\" }; input that does not fit its schema is a 400 naming the field.",
  ));

/** What the Worker is made of: its chat bridges (one line each, bridges/index.ts) and the plugins a mount may name. */
export interface Composition {
  bridges: readonly ChatBridge[];
  plugins: readonly Plugin[];
}

/** What the runtime is handed rather than importing: each bridge's outbound, and the plugins. */
export const runtimeDeps = (made: Composition): RuntimeDeps => ({ outbounds: made.bridges.map((b) => b.outbound), plugins: made.plugins });

/** /v1: the document (open), then the Agents API and the bridges' admin routes behind its token. */
export function v1Api(made: Composition): Hono<{ Bindings: Env }> {
  const v1 = new Hono<{ Bindings: Env }>();
  // Before the API's token check, which guards every route of the app it builds.
  v1.get(describeDocument.path, (c) => c.json(apiDocument()));
  const api = agentsApi(runtimeDeps(made));
  for (const bridge of made.bridges) if (bridge.admin) api.route("/", bridge.admin.routes);
  // The Responses API and the follow route, behind the same authentication.
  api.route("/", responsesRoutes());
  v1.route("/", api);
  return v1;
}

/** The Worker's fetch, queue and scheduled (the daily ledger fold) handlers over the given dependencies. */
export function createWorker(made: Composition): ExportedHandler<Env> {
  const app = new Hono<{ Bindings: Env }>();
  app.get("/", (c) =>
    c.json({
      name: "antiproton",
      docs: "README.md and docs/ in the repository",
      routes: { "/v1": "Agents API (Bearer ADMIN_TOKEN); described at /v1/openapi.json", "/console": "web console (sign in with ADMIN_TOKEN)", ...Object.fromEntries(made.bridges.map((b) => [b.path, `${b.path.slice(1)} bridge`])) },
    }),
  );
  app.route("/v1", v1Api(made));
  app.route("/console", consoleRoutes);
  app.route("/console", referenceRoutes(apiDocument));
  for (const bridge of made.bridges) app.route(bridge.path, bridge.routes);

  // The OpenAI-compatible routes answer in OpenAI's error shape, whoever refused the request (the key check too).
  const refuse = (c: Context, status: ContentfulStatusCode, message: string) => c.json(isResponsesPath(c.req.path) ? openAIErrorBody(status, message) : { error: message }, status);
  app.notFound((c) => refuse(c, 404, `no route for ${c.req.method} ${c.req.path}`));
  app.onError((err, c) => {
    const { status, message } = errorAnswer(err);
    if (err instanceof HttpError && err.retryAfterSeconds !== undefined) c.header("retry-after", String(err.retryAfterSeconds));
    return refuse(c, status, message);
  });
  return {
    fetch: app.fetch,
    queue: (batch, env) => consumeQueue(batch, env),
    scheduled: async (controller, env) => void (await foldLedgers(env, controller.scheduledTime)),
  };
}

/** What a request that failed is answered: its status, and a message that says what was wrong. */
function errorAnswer(err: Error): { status: ContentfulStatusCode; message: string } {
  if (err instanceof HttpError) return { status: err.status, message: err.message };
  if (err instanceof ConfigError) {
    console.error(err.message);
    return { status: 503, message: `configuration error: ${err.message}` };
  }
  // An object whose schema this deploy could not bring forward (rolled back): unavailable, not broken.
  const migration = migrationFailure(err);
  if (migration !== null) return { status: 503, message: migration };
  console.error("unhandled error", err);
  return { status: 500, message: "internal error" };
}

export const deployed: Composition = { bridges, plugins: builtinPlugins };
const deps = runtimeDeps(deployed);

export class AgentObject extends AgentCore {
  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env, deps);
  }
}

export class Courier extends CourierCore {
  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env, deps);
  }
}

export default createWorker(deployed);

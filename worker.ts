// The composition root: the only file that imports bridges, console and
// runtime together. It hands the runtime its dependencies explicitly (each
// bridge's outbound, the plugins a mount may name) and serves the routes.
import { Hono, type Context } from "hono";
import type { ContentfulStatusCode } from "hono/utils/http-status";
import { bridges } from "./bridges/index.ts";
import { consoleRoutes } from "./console/index.ts";
import { ConfigError } from "./lib/config.ts";
import { HttpError } from "./lib/http.ts";
import { migrationFailure } from "./lib/migrations.ts";
import { builtinPlugins } from "./plugins/index.ts";
import { agentsApi, AgentObject as AgentCore, consumeQueue, Courier as CourierCore, foldLedgers, isResponsesPath, openAIErrorBody, responsesRoutes, type RuntimeDeps } from "./runtime/index.ts";

export { ControlPlane, Ledger, ProviderGate, SendPace } from "./runtime/index.ts";
// The Cloudflare machine backend's objects, and the entrypoint its outbound filtering goes through.
export { Machine, ContainerProxy } from "./machines/index.ts";

/** The Worker's fetch, queue and scheduled (the daily ledger fold) handlers over the given dependencies. */
export function createWorker(deps: RuntimeDeps): ExportedHandler<Env> {
  const app = new Hono<{ Bindings: Env }>();
  app.get("/", (c) =>
    c.json({
      name: "antiproton",
      docs: "README.md and docs/ in the repository",
      routes: { "/v1": "Agents API (Bearer ADMIN_TOKEN)", "/console": "web console (sign in with ADMIN_TOKEN)", ...Object.fromEntries(bridges.map((b) => [b.path, `${b.path.slice(1)} bridge`])) },
    }),
  );
  const api = agentsApi(deps);
  for (const bridge of bridges) if (bridge.admin) api.route(bridge.path, bridge.admin);
  // The Responses API and the follow route, behind the Agents API's authentication.
  api.route("/", responsesRoutes());
  app.route("/v1", api);
  app.route("/console", consoleRoutes);
  for (const bridge of bridges) app.route(bridge.path, bridge.routes);

  // The OpenAI-compatible routes answer in OpenAI's error shape, whoever refused the request (the key check too).
  const refuse = (c: Context, status: ContentfulStatusCode, message: string) => c.json(isResponsesPath(c.req.path) ? openAIErrorBody(status, message) : { error: message }, status);
  app.notFound((c) => refuse(c, 404, `no route for ${c.req.method} ${c.req.path}`));
  app.onError((err, c) => {
    const { status, message } = errorAnswer(err);
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

export const deps: RuntimeDeps = { outbounds: bridges.map((b) => b.outbound), plugins: builtinPlugins };

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

export default createWorker(deps);

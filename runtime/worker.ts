// The Worker entry: routes, the queue consumers, and the AgentObject class.
import { Hono } from "hono";
import { bridges } from "../bridges/index.ts";
import { consoleRoutes } from "../console/index.ts";
import { api } from "./api.ts";
import { ConfigError } from "./config.ts";
import { HttpError } from "./http.ts";
import { consumeDeadModelJobs, consumeModelJobs } from "./model-consumer.ts";
import { registerOutbound } from "./outbound.ts";

export { AgentObject } from "./agent-object.ts";
export { ControlPlane } from "./control-plane.ts";

for (const bridge of bridges) registerOutbound(bridge.outbound);

const app = new Hono<{ Bindings: Env }>();

app.get("/", (c) =>
  c.json({ name: "antiproton", docs: "https://github.com/antiproton (see README.md)", routes: ["/v1", ...bridges.map((b) => b.path)] }),
);
for (const bridge of bridges) if (bridge.admin) api.route(bridge.path, bridge.admin);
app.route("/v1", api);
app.route("/console", consoleRoutes);
for (const bridge of bridges) app.route(bridge.path, bridge.routes);

app.notFound((c) => c.json({ error: `no route for ${c.req.method} ${new URL(c.req.url).pathname}` }, 404));
app.onError((err, c) => {
  if (err instanceof HttpError) return c.json({ error: err.message }, err.status);
  if (err instanceof ConfigError) {
    console.error(err.message);
    return c.json({ error: `configuration error: ${err.message}` }, 503);
  }
  console.error("unhandled error", err);
  return c.json({ error: "internal error" }, 500);
});

const DEAD_LETTER_SUFFIX = "-dlq";

export default {
  fetch: app.fetch,
  async queue(batch, env) {
    if (batch.queue.endsWith(DEAD_LETTER_SUFFIX)) await consumeDeadModelJobs(batch, env);
    else await consumeModelJobs(batch, env);
  },
} satisfies ExportedHandler<Env>;

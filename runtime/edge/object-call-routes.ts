// The calls into Durable Objects this isolate has counted (lib/object-calls.ts),
// for a measuring run (`npm run bench`, section scale; docs/scale.md): there
// only with COUNT_OBJECT_CALLS on, and for the platform alone.
import type { Hono } from "hono";
import * as z from "zod";
import { HttpError } from "../../lib/http.ts";
import { countingObjectCalls } from "../../lib/config.ts";
import { objectCallCounts } from "../../lib/object-calls.ts";
import type { RouteDoc } from "../../lib/route-doc.ts";
import { errors, serve } from "../../lib/serve-route.ts";
import { requirePlatform } from "../access/index.ts";

const readObjectCalls = {
  method: "get",
  path: "/object-calls",
  summary: "The calls into Durable Objects counted in this isolate since it started, by object and method (COUNT_OBJECT_CALLS on only; the platform's token)",
  responses: {
    200: {
      description: "Every object and method called, most called first; `objectClass` as wrangler.jsonc names it, `object` the name it was reached by, `method` the RPC method (or fetch).",
      schema: z.object({ objects: z.array(z.object({ objectClass: z.string(), object: z.string(), method: z.string(), calls: z.number().int() })) }),
    },
    ...errors(403, 404),
  },
} satisfies RouteDoc;

export const objectCallRouteDocs: RouteDoc[] = [readObjectCalls];

export function objectCallRoutes(api: Hono<{ Bindings: Env }>): void {
  serve(api, readObjectCalls, (c) => {
    if (!countingObjectCalls(c.env)) throw new HttpError(404, "no route for GET /v1/object-calls: calls into objects are counted only with COUNT_OBJECT_CALLS=true");
    requirePlatform(c);
    return c.json({ objects: objectCallCounts() });
  });
}

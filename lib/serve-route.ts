// Serving a described /v1 route (lib/route-doc.ts): the path, query and body
// are parsed with the very schemas the OpenAPI document shows, and a request
// that does not fit is answered 400 naming the field, before the handler runs.
import type { Context, Hono } from "hono";
import * as z from "zod";
import { HttpError, parseJson, readBody } from "./http.ts";
import type { RouteDoc } from "./route-doc.ts";

/** The largest JSON body a /v1 route takes. */
export const API_MAX_BODY_BYTES = 64 * 1024;

/** `{ "error": "<what was wrong>" }`: every /v1 error. */
export const apiError = z.object({ error: z.string() });

const ERROR_WORDS: Record<number, string> = {
  400: "Does not fit the schema (the error names the field).",
  403: "Not allowed.",
  404: "Not found (or the agent was deleted).",
  409: "Conflicts with what exists.",
  413: "Body too large.",
  415: "Body not JSON.",
  503: "Saved, but an agent was not told yet: repeat.",
};

/** The documented error answers of a route, in the one error shape. */
export function errors(...statuses: number[]): RouteDoc["responses"] {
  return Object.fromEntries(statuses.map((status) => [status, { description: ERROR_WORDS[status]!, schema: apiError }]));
}

type Described<P, Q, B> = Omit<RouteDoc, "params" | "query" | "body"> & { params?: P; query?: Q; body?: B };
type Output<S> = S extends z.ZodType ? z.output<S> : undefined;
export type RouteInput<P, Q, B> = { params: Output<P>; query: Output<Q>; body: Output<B> };

/** Parses `value` with `schema`; a misfit is a 400 naming what is wrong and where. */
export function parseOr400<S extends z.ZodType>(schema: S, value: unknown, where: string): z.output<S> {
  const parsed = schema.safeParse(value);
  if (!parsed.success) throw new HttpError(400, `${where}: ${z.prettifyError(parsed.error)}`);
  return parsed.data;
}

/** A JSON body parsed with `schema`: too large 413, not JSON 415, a misfit 400 naming the field. */
export async function readJsonBody<S extends z.ZodType>(c: Context, schema: S, maxBytes = API_MAX_BODY_BYTES): Promise<z.output<S>> {
  const raw = await readBody(c, { contentTypes: ["application/json"], maxBytes });
  return parseOr400(schema, parseJson(raw), "bad body");
}

/** Registers `handler` at the route `doc` describes, behind the parse of its path, query and body. */
export function serve<E extends { Bindings: Env }, P extends z.ZodObject | undefined = undefined, Q extends z.ZodObject | undefined = undefined, B extends z.ZodType | undefined = undefined>(
  app: Hono<E>,
  doc: Described<P, Q, B>,
  handler: (c: Context<E>, input: RouteInput<P, Q, B>) => Response | Promise<Response>,
): void {
  const path = doc.path.replace(/\{(\w+)\}/g, ":$1");
  app.on(doc.method.toUpperCase(), path, async (c) => {
    const params = doc.params ? parseOr400(doc.params, c.req.param(), "bad path") : undefined;
    const query = doc.query ? parseOr400(doc.query, c.req.query(), "bad query") : undefined;
    const body = doc.body ? await readJsonBody(c, doc.body) : undefined;
    return handler(c as Context<E>, { params, query, body } as RouteInput<P, Q, B>);
  });
}

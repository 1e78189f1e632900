// The OpenAPI 3.1 document of /v1, built from the routes' own descriptions
// (lib/route-doc.ts): the JSON Schemas in it are zod's rendering of the very
// schemas that validate each request, so the document cannot drift from them.
import * as z from "zod";
import type { RouteDoc } from "./route-doc.ts";

type JsonSchema = Record<string, unknown>;

export interface OpenApiDocument {
  openapi: "3.1.0";
  info: { title: string; version: string; description: string };
  servers: { url: string }[];
  security: Record<string, string[]>[];
  components: { securitySchemes: Record<string, unknown> };
  paths: Record<string, Record<string, unknown>>;
}

/** Request schemas describe what a client sends (defaults optional); response schemas what it gets. */
function jsonSchema(schema: z.ZodType, io: "input" | "output"): JsonSchema {
  const { $schema: _draft, ...rest } = z.toJSONSchema(schema, { target: "draft-2020-12", io, unrepresentable: "any" }) as JsonSchema;
  return rest;
}

function parameters(where: "path" | "query", schema: z.ZodObject | undefined): unknown[] {
  if (!schema) return [];
  const object = jsonSchema(schema, "input") as { properties?: Record<string, JsonSchema>; required?: string[] };
  return Object.entries(object.properties ?? {}).map(([name, property]) => {
    const { description, ...rest } = property;
    return { name, in: where, required: where === "path" || (object.required ?? []).includes(name), ...(description ? { description } : {}), schema: rest };
  });
}

function operation(route: RouteDoc, open: boolean): Record<string, unknown> {
  return {
    summary: route.summary,
    ...(open ? { security: [] } : {}),
    parameters: [...parameters("path", route.params), ...parameters("query", route.query)],
    ...(route.body ? { requestBody: { required: true, content: { "application/json": { schema: jsonSchema(route.body, "input") } } } } : {}),
    responses: Object.fromEntries(
      Object.entries(route.responses).map(([status, answer]) => [
        status,
        { description: answer.description, ...(answer.schema ? { content: { [answer.contentType ?? "application/json"]: { schema: jsonSchema(answer.schema, "output") } } } : {}) },
      ]),
    ),
  };
}

/** The document: `routes` behind the bearer token, `open` ones without. */
export function openApiDocument(routes: readonly RouteDoc[], open: readonly RouteDoc[], description: string): OpenApiDocument {
  const paths: OpenApiDocument["paths"] = {};
  for (const [route, isOpen] of [...routes.map((r) => [r, false] as const), ...open.map((r) => [r, true] as const)]) {
    const item = (paths[route.path] ??= {});
    if (item[route.method]) throw new Error(`two descriptions of ${route.method.toUpperCase()} ${route.path}`);
    item[route.method] = operation(route, isOpen);
  }
  return {
    openapi: "3.1.0",
    info: { title: "antiproton /v1", version: "1", description },
    servers: [{ url: "/v1" }],
    security: [{ bearer: [] }],
    components: { securitySchemes: { bearer: { type: "http", scheme: "bearer", description: "ADMIN_TOKEN" } } },
    paths,
  };
}

// A /v1 route as the OpenAPI document describes it, with the zod schemas that validate it.
import type * as z from "zod";

export type RouteDoc = {
  method: "get" | "post" | "put" | "patch" | "delete";
  /** OpenAPI style, under /v1: "/tenants/{tenant}/agents/{agent}". */
  path: string;
  summary: string;
  params?: z.ZodObject;
  query?: z.ZodObject;
  body?: z.ZodType;
  responses: Record<number, { description: string; schema?: z.ZodType; contentType?: string }>;
};

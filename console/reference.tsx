// The API reference page: the OpenAPI document of /v1 (lib/openapi.ts), drawn
// on the server with hono/jsx, no script of its own: each route's method, path
// and summary, then its parameters, body and answers as the document has them.
import { Hono } from "hono";
import type { OpenApiDocument } from "../lib/openapi.ts";
import { guard, show } from "./routes.tsx";
import { BASE, type ConsoleEnv } from "./session.ts";

/** GET /console/reference, behind the console's sign-in like every other page. */
export function referenceRoutes(described: () => OpenApiDocument): Hono<ConsoleEnv> {
  const routes = new Hono<ConsoleEnv>();
  routes.use("/reference", guard);
  routes.get("/reference", (c) => {
    const document = described();
    const operations = Object.entries(document.paths).flatMap(([path, item]) =>
      Object.entries(item).map(([method, op]) => ({ id: `${method}${path}`.replace(/\W+/g, "-"), title: `${method.toUpperCase()} /v1${path}`, op: op as { summary: string } })),
    );
    return show(c, {
      title: "API reference",
      crumbs: [{ href: BASE, label: "Tenants" }],
      children: (
        <>
          <p>
            {document.info.description} As a document: <a href="/v1/openapi.json">/v1/openapi.json</a> (OpenAPI {document.openapi}).
          </p>
          <ul>
            {operations.map(({ id, title, op }) => (
              <li>
                <a href={`#${id}`}>
                  <code>{title}</code>
                </a>{" "}
                <small>{op.summary}</small>
              </li>
            ))}
          </ul>
          {operations.map(({ id, title, op: { summary, ...rest } }) => (
            <section id={id}>
              <h3>
                <code>{title}</code>
              </h3>
              <p>{summary}</p>
              <details>
                <summary>Parameters, body and answers</summary>
                <pre>{JSON.stringify(rest, null, 2)}</pre>
              </details>
            </section>
          ))}
        </>
      ),
    });
  });
  return routes;
}

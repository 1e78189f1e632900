// Small helpers shared by the loopback fakes.
import { createServer } from "node:http";
import { LOOPBACK_KEEP_ALIVE_MS } from "../../scripts/loopback-keep-alive.mjs";

export function readBody(req) {
  return new Promise((resolve, reject) => {
    const chunks = [];
    req.on("data", (c) => chunks.push(c));
    req.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
    req.on("error", reject);
  });
}

export function sendJson(res, status, body, headers = {}) {
  res.writeHead(status, { "content-type": "application/json", ...headers });
  res.end(JSON.stringify(body));
}

/** Starts `handler` on 127.0.0.1 at a free port. */
export function listen(handler) {
  return new Promise((resolve) => {
    const server = createServer((req, res) => {
      handler(req, res).catch((err) => {
        console.error("fake server error", err);
        if (!res.headersSent) sendJson(res, 500, { error: String(err) });
      });
    });
    // Idle connections stay open as long as the local dev server's own do (scripts/loopback-keep-alive.mjs):
    // a fake that closed them after Node's 5 s would fail requests a busy workerd sends on them late.
    server.keepAliveTimeout = LOOPBACK_KEEP_ALIVE_MS;
    server.headersTimeout = LOOPBACK_KEEP_ALIVE_MS + 1_000;
    server.unref();
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address();
      resolve({ url: `http://127.0.0.1:${port}`, close: () => new Promise((r) => { server.closeAllConnections(); server.close(() => r()); }) });
    });
  });
}

// Small helpers shared by the loopback fakes.
import { createServer } from "node:http";

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
    server.unref();
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address();
      resolve({ url: `http://127.0.0.1:${port}`, close: () => new Promise((r) => { server.closeAllConnections(); server.close(() => r()); }) });
    });
  });
}

// A remote HTTP API on loopback for the http plugin. It is careless on
// purpose: it echoes the credentials it receives, in several encodings, so the
// tests can show the gateway keeps them out of everything the agent sees.
import { listen, readBody, sendJson } from "./http.mjs";

/** The canary: a secret value that must never appear anywhere but the Worker's env. */
export const REMOTE_API_TOKEN = "canary-7f3a9c2e51d84b06e2";

export async function startRemote() {
  const posts = [];
  return listen(async (req, res) => {
    const url = new URL(req.url, "http://x");
    const auth = req.headers.authorization ?? "";
    const token = auth.replace(/^Bearer /, "");
    if (req.method === "GET" && url.pathname === "/echo") {
      return sendJson(res, 200, { youSent: auth, base64: Buffer.from(token).toString("base64"), urlEncoded: encodeURIComponent(token) });
    }
    if (req.method === "GET" && url.pathname === "/page") {
      res.writeHead(200, { "content-type": "text/html; charset=utf-8" });
      return res.end(`<html><head><style>p{}</style><script>var t="${token}"</script></head><body><h1>Status</h1><p>All systems go &amp; fine.</p><p>debug: ${token}</p></body></html>`);
    }
    if (req.method === "POST" && url.pathname === "/orders") {
      posts.push({ body: await readBody(req), authorized: token === REMOTE_API_TOKEN });
      return sendJson(res, 201, { created: posts.length });
    }
    if (req.method === "GET" && url.pathname === "/_control/orders") return sendJson(res, 200, posts);
    return sendJson(res, 404, { error: "not found" });
  });
}

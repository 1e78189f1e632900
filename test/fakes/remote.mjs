// A remote HTTP API on loopback for the http plugin. It is careless on
// purpose: it echoes the credentials it receives, in several encodings, so the
// tests can show the gateway keeps them out of everything the agent sees.
import { listen, readBody, sendJson } from "./http.mjs";

/**
 * The canary: a secret value that must never appear anywhere but the Worker's
 * env. It has characters that URL encoding, JSON escaping and HTML escaping
 * change, so each of those encodings differs from the value itself.
 */
export const REMOTE_API_TOKEN = `canary-7f3a/9c+2e=51"d8\\4b?06 e2'x`;

/** The credentials a request carried, echoed in every encoding this careless remote knows. */
function echoed(auth) {
  const token = auth.replace(/^Bearer /, "");
  const half = Math.floor(token.length / 2);
  return {
    youSent: auth,
    base64: Buffer.from(token).toString("base64"),
    headerBase64: Buffer.from(auth).toString("base64"),
    headerBase64Url: Buffer.from(`x${auth}`).toString("base64url"),
    basicAuth: `Basic ${Buffer.from(`user:${token}`).toString("base64")}`,
    urlEncoded: encodeURIComponent(token),
    urlEncodedLower: encodeURIComponent(token).replace(/%[0-9A-F]{2}/g, (e) => e.toLowerCase()),
    formEncoded: new URLSearchParams({ token }).toString(),
    jsonInJson: JSON.stringify({ authorization: auth }),
    asciiJson: JSON.stringify(token).replace(/[\u007f-\uffff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`),
    html: token.replace(/&/g, "&amp;").replace(/"/g, "&quot;").replace(/'/g, "&#39;"),
    hex: Buffer.from(token).toString("hex"),
    htmlDecimal: [...token].map((c) => `&#${c.codePointAt(0)};`).join(""),
    htmlHex: [...token].map((c) => `&#x${c.codePointAt(0).toString(16).toUpperCase()};`).join(""),
    // Broken for display, as a terminal or a log viewer does.
    splitLines: `${token.slice(0, half)}\r\n  ${token.slice(half)}`,
    // Wrapped at 16 columns, as MIME and PEM wrap base64 (at 76 and 64).
    base64Wrapped: Buffer.from(token).toString("base64").replace(/.{16}(?=.)/g, "$&\n"),
  };
}

export async function startRemote() {
  const posts = [];
  const inbox = [];
  return listen(async (req, res) => {
    const url = new URL(req.url, "http://x");
    const auth = req.headers.authorization ?? "";
    const token = auth.replace(/^Bearer /, "");
    if (req.method === "GET" && url.pathname === "/echo") {
      // As JSON, so every string below also arrives JSON-escaped (and a line break as "\n").
      return sendJson(res, 200, echoed(auth));
    }
    if (req.method === "GET" && url.pathname === "/echo.txt") {
      // The same as plain text: line breaks arrive as they are.
      res.writeHead(200, { "content-type": "text/plain; charset=utf-8" });
      return res.end(Object.entries(echoed(auth)).map(([name, value]) => `${name}:\n${value}`).join("\n\n"));
    }
    if (req.method === "GET" && url.pathname === "/page") {
      res.writeHead(200, { "content-type": "text/html; charset=utf-8" });
      return res.end(`<html><head><style>p{}</style><script>var t="${token}"</script></head><body><h1>Status</h1><p>All systems go &amp; fine.</p><p>debug: ${token}</p></body></html>`);
    }
    if (req.method === "POST" && url.pathname === "/orders") {
      posts.push({ body: await readBody(req), authorized: token === REMOTE_API_TOKEN });
      return sendJson(res, 201, { created: posts.length });
    }
    if (req.method === "POST" && url.pathname === "/inbox") {
      // A receiver that keeps the credential it was sent, whatever it is (test/runtime/control/tenant-secrets.test.ts).
      inbox.push({ authorization: auth, body: await readBody(req) });
      return sendJson(res, 201, { received: inbox.length });
    }
    if (req.method === "GET" && url.pathname === "/_control/inbox") return sendJson(res, 200, inbox);
    if (req.method === "GET" && url.pathname === "/_control/orders") return sendJson(res, 200, posts);
    return sendJson(res, 404, { error: "not found" });
  });
}

// The way out of a machine whose mount allows some hosts: an HTTP proxy on a
// unix socket in the machine's folder (machined serves it inside the machine
// on 127.0.0.1:3128). It admits CONNECT and absolute-form requests to the
// allowed hosts only; everything else has no route out of the machine's
// network namespace. A name is resolved here, and a name that resolves to a
// loopback or private address is refused unless that address itself is allowed
// (so a public name pointed at 127.0.0.1 cannot reach the host's own services).
import { lookup } from "node:dns/promises";
import { createServer, request } from "node:http";
import { connect, isIP } from "node:net";

/** "host" admits ports 80 and 443, "host:port" that port, "*.example.com" any subdomain on 80 and 443. */
export function hostAllowed(allowed, host, port) {
  const name = host.toLowerCase().replace(/^\[|\]$/g, "");
  return allowed.some((raw) => {
    const pattern = raw.toLowerCase();
    const withPort = /^(.*):(\d+)$/.exec(pattern);
    if (withPort && !withPort[1].startsWith("[") && withPort[1].includes(":")) return false; // a bare IPv6 address needs brackets
    const [patternHost, patternPort] = withPort ? [withPort[1].replace(/^\[|\]$/g, ""), Number(withPort[2])] : [pattern.replace(/^\[|\]$/g, ""), undefined];
    const portOk = patternPort === undefined ? port === 80 || port === 443 : port === patternPort;
    if (!portOk) return false;
    if (patternHost.startsWith("*.")) return name.endsWith(patternHost.slice(1));
    return name === patternHost;
  });
}

function isPrivate(address) {
  if (isIP(address) === 6) {
    const a = address.toLowerCase();
    if (a.startsWith("::ffff:")) return isPrivate(a.slice(7));
    return a === "::1" || a === "::" || a.startsWith("fc") || a.startsWith("fd") || a.startsWith("fe8") || a.startsWith("fe9") || a.startsWith("fea") || a.startsWith("feb");
  }
  const [a, b] = address.split(".").map(Number);
  return a === 127 || a === 10 || a === 0 || (a === 172 && b >= 16 && b <= 31) || (a === 192 && b === 168) || (a === 169 && b === 254) || (a === 100 && b >= 64 && b <= 127);
}

/** The address to connect to, or a reason it may not be reached. */
async function resolveAllowed(allowed, host, port) {
  if (!hostAllowed(allowed, host, port)) return { refused: `${host}:${port} is not an allowed host of this machine` };
  const name = host.replace(/^\[|\]$/g, "");
  if (isIP(name)) return { address: name };
  let address;
  try {
    ({ address } = await lookup(name));
  } catch (err) {
    return { refused: `${host} does not resolve (${err.code ?? err.message})` };
  }
  if (isPrivate(address)) return { refused: `${host} resolves to the private address ${address}, which is not allowed` };
  return { address };
}

function refuse(res, status, text) {
  res.writeHead(status, { "content-type": "text/plain", "content-length": Buffer.byteLength(text) });
  res.end(text);
}

/** Starts the proxy for one machine on `socketPath`; resolves once it listens. */
export function startProxy(socketPath, allowed) {
  const server = createServer(async (req, res) => {
    // Plain http through a proxy: the request line holds the absolute URL.
    let url;
    try {
      url = new URL(req.url ?? "");
    } catch {
      return refuse(res, 400, "this proxy takes absolute URLs (http://host/path) and CONNECT");
    }
    if (url.protocol !== "http:") return refuse(res, 400, "only http:// URLs; use CONNECT for https");
    const port = Number(url.port || "80");
    const target = await resolveAllowed(allowed, url.hostname, port);
    if (target.refused) return refuse(res, 403, target.refused);
    const upstream = request(
      { host: target.address, port, method: req.method, path: `${url.pathname}${url.search}`, headers: { ...req.headers, host: url.host }, servername: url.hostname },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      },
    );
    upstream.on("error", (err) => (res.headersSent ? res.destroy() : refuse(res, 502, `could not reach ${url.host}: ${err.message}`)));
    req.pipe(upstream);
  });
  server.on("connect", async (req, client, head) => {
    const match = /^(\[[^\]]+\]|[^:]+):(\d+)$/.exec(req.url ?? "");
    const reply = (status, text) => client.end(`HTTP/1.1 ${status}\r\ncontent-type: text/plain\r\ncontent-length: ${Buffer.byteLength(text)}\r\n\r\n${text}`);
    client.on("error", () => client.destroy());
    if (!match) return reply("400 Bad Request", "CONNECT takes host:port");
    const port = Number(match[2]);
    const target = await resolveAllowed(allowed, match[1], port);
    if (target.refused) return reply("403 Forbidden", target.refused);
    let established = false;
    const upstream = connect(port, target.address, () => {
      established = true;
      client.write("HTTP/1.1 200 Connection Established\r\n\r\n");
      if (head.length) upstream.write(head);
      upstream.pipe(client).pipe(upstream);
    });
    upstream.on("error", (err) => (established ? client.destroy() : reply("502 Bad Gateway", `could not reach ${req.url}: ${err.message}`)));
    client.on("close", () => upstream.destroy());
  });
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(socketPath, () => resolve({ close: () => new Promise((done) => server.close(() => done())) }));
  });
}

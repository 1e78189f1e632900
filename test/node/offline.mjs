// Preloaded (NODE_OPTIONS=--import=…) into every Node process a test starts, to
// stand for a machine with no network: any name but loopback fails to resolve,
// as getaddrinfo does offline. Node's fetch, undici and http all resolve through dns.lookup.
import dns from "node:dns";

const LOOPBACK = new Set(["localhost", "127.0.0.1", "::1"]);
const resolve = dns.lookup;

dns.lookup = function lookup(hostname, options, callback) {
  if (LOOPBACK.has(hostname)) return resolve.call(this, hostname, options, callback);
  const done = typeof options === "function" ? options : callback;
  const err = Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: "ENOTFOUND", syscall: "getaddrinfo", hostname });
  process.nextTick(done, err);
};

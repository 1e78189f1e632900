// Preloaded (node --import) into the process of the reference MCP server that
// test/fakes/everything.mjs starts. The server listens on every interface and
// has no setting for it: here it listens on loopback only. And it ends when the
// process that started it does (its stdin, a pipe from that process, closes),
// so no run leaves it behind.
import net from "node:net";

const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function loopbackOnly(port, ...rest) {
  if (typeof port !== "number" && typeof port !== "string") return listen.call(this, port, ...rest);
  return listen.call(this, Number(port), "127.0.0.1", ...rest.filter((arg) => typeof arg === "function"));
};

process.stdin.on("end", () => process.exit(0)).resume();

// Loaded into every Node process that hosts Miniflare (the `wrangler dev` of
// npm start, the bench and the Node tests through scripts/wrangler-env.mjs's
// NODE_OPTIONS; the vitest pool through vitest.config.ts), before Miniflare
// makes its loopback server.
//
// Miniflare's queue broker posts a log line to that server after every batch
// it delivers, and only then lets the next batch go; if that post fails, the
// queue never delivers again (miniflare 4.20260426, QueueBrokerObject#flush).
// Node closes an idle keep-alive connection after 5 s; when workerd's one
// thread is busy for longer than that (a burst of new objects writing their
// SQLite on a slow disk), its next post goes out on a connection Node has
// closed, fails with "Network connection lost", and every effect after it
// waits forever. Idle connections here are kept far longer than any stall.
import http from "node:http";
import { syncBuiltinESMExports } from "node:module";

export const LOOPBACK_KEEP_ALIVE_MS = 10 * 60_000;

const createServer = http.createServer;
http.createServer = function keptAlive(...args) {
  const server = createServer.apply(this, args);
  server.keepAliveTimeout = LOOPBACK_KEEP_ALIVE_MS;
  // A request's headers must still arrive in time; Node wants this above the keep-alive.
  server.headersTimeout = LOOPBACK_KEEP_ALIVE_MS + 1_000;
  return server;
};
syncBuiltinESMExports();

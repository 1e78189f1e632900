// The local dev server's loopback keeps idle connections (scripts/loopback-keep-alive.mjs):
// Miniflare's queue stops for good when a post to it fails, and a post fails when
// it goes out on a connection Node closed while workerd was busy.
import assert from "node:assert/strict";
import http from "node:http";
import { connect } from "node:net";
import { setTimeout as sleep } from "node:timers/promises";
import { test } from "node:test";
import { LOOPBACK_KEEP_ALIVE_MS } from "../../scripts/loopback-keep-alive.mjs";

/** Sends `count` requests on one connection, `gapMs` apart; resolves with the status lines read. */
async function oneConnection(port, count, gapMs) {
  const socket = connect(port, "127.0.0.1");
  let received = "";
  let closed = false;
  socket.on("data", (chunk) => (received += chunk));
  socket.on("close", () => (closed = true));
  socket.on("error", () => (closed = true));
  for (let i = 0; i < count; i++) {
    if (i > 0) await sleep(gapMs);
    if (closed) break;
    socket.write("POST /core/log HTTP/1.1\r\nHost: localhost\r\nContent-Length: 2\r\n\r\nok");
    await sleep(100);
  }
  socket.destroy();
  return received.match(/HTTP\/1\.1 \d+/g) ?? [];
}

test("a server made after it keeps an idle connection open past Node's default (5 s and a second's grace), so a late request on it is answered", async () => {
  assert.ok(LOOPBACK_KEEP_ALIVE_MS >= 60_000);
  const server = http.createServer((req, res) => req.resume().on("end", () => res.end()));
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  try {
    assert.deepEqual(await oneConnection(server.address().port, 2, 7_000), ["HTTP/1.1 200", "HTTP/1.1 200"]);
  } finally {
    server.closeAllConnections();
    server.close();
  }
});

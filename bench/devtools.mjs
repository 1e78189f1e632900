// The Worker's isolate over `wrangler dev`'s inspector (its devtools port).
//
// untrace: wrangler's inspector proxy turns on the devtools Network domain in
// its session with the runtime, so every subrequest (and every chunk of a
// streamed one) is traced to it as events: CPU in our runtime and in
// wrangler's proxy workerd on the same cores, which a deployed Worker does not
// pay. Measured on this box: ten streamed fetches (20 chunks each) cost 24 ms
// of runtime CPU and 79 ms of proxy CPU traced, 10 and 2 untraced. Commands
// sent through the devtools port go to that session, so Network.disable there
// stops the tracing until the runtime restarts (wrangler enables it again
// when it reconnects: the bench untraces before each section).
//
// profiler: a CPU profile (BENCH_PROFILE=<dir>): what the JS spends a phase on.
import { writeFileSync } from "node:fs";
import WebSocket from "ws";

/** A devtools connection to each of the inspector's targets: `send(method, params)` answers with the result. */
async function connect(inspectorPort) {
  const targets = await (await fetch(`http://127.0.0.1:${inspectorPort}/json`)).json();
  return Promise.all(
    targets.map(
      (t) =>
        new Promise((resolve, reject) => {
          const ws = new WebSocket(t.webSocketDebuggerUrl);
          let id = 0;
          const pending = new Map();
          ws.on("message", (m) => {
            const msg = JSON.parse(String(m));
            if (msg.id && pending.has(msg.id)) pending.get(msg.id)(msg.result);
          });
          const send = (method, params = {}) =>
            new Promise((res) => {
              pending.set(++id, res);
              ws.send(JSON.stringify({ id, method, params }));
            });
          ws.on("open", () => resolve({ send, ws }));
          ws.on("error", reject);
        }),
    ),
  );
}

/** Stops the Network tracing of wrangler's session with the runtime (see above). */
export async function untrace(inspectorPort) {
  const sockets = await connect(inspectorPort);
  await Promise.all(sockets.map((s) => s.send("Network.disable")));
  sockets.forEach((s) => s.ws.close());
}

export async function profiler(inspectorPort) {
  const sockets = await connect(inspectorPort);
  return {
    async start() {
      for (const s of sockets) {
        await s.send("Profiler.enable");
        await s.send("Profiler.setSamplingInterval", { interval: 200 });
        await s.send("Profiler.start");
      }
    },
    async stop(dir, label) {
      for (const [i, s] of sockets.entries()) {
        const { profile } = await s.send("Profiler.stop");
        writeFileSync(`${dir}/${label}-${i}.cpuprofile`, JSON.stringify(profile));
      }
    },
    close: () => sockets.forEach((s) => s.ws.close()),
  };
}

// A CPU profile of the Worker's isolate over the inspector (BENCH_PROFILE=<dir>): what its JS spends a phase on.
import { writeFileSync } from "node:fs";
import WebSocket from "ws";

export async function profiler(inspectorPort) {
  const targets = await (await fetch(`http://127.0.0.1:${inspectorPort}/json`)).json();
  const sockets = await Promise.all(
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
          ws.on("open", () => resolve({ title: t.title ?? t.id, send, ws }));
          ws.on("error", reject);
        }),
    ),
  );
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

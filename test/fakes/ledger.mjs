// A loopback "outside system" with a write that is not idempotent: each POST
// /append records one entry. Tests count performances and can hold an append
// mid-flight (PUT /_control/hold/<entry>, then POST /_control/release/<entry>).
import { listen, readBody, sendJson } from "./http.mjs";

export async function startLedger() {
  const appends = [];
  const holds = new Map(); // entry → { waiting: resolve | null, released: boolean }
  return listen(async (req, res) => {
    const url = new URL(req.url, "http://x");
    const hold = /^\/_control\/(hold|release)\/(.+)$/.exec(url.pathname);
    if (hold) {
      const entry = decodeURIComponent(hold[2]);
      if (hold[1] === "hold") holds.set(entry, { waiting: null, released: false });
      else {
        const h = holds.get(entry);
        if (h) { h.released = true; h.waiting?.(); }
      }
      return sendJson(res, 200, { ok: true });
    }
    if (req.method === "GET" && url.pathname === "/appends") {
      const entry = url.searchParams.get("entry");
      return sendJson(res, 200, appends.filter((a) => entry === null || a.entry === entry));
    }
    if (req.method === "POST" && url.pathname === "/append") {
      const body = JSON.parse(await readBody(req));
      appends.push({ ...body, at: Date.now() });
      const h = holds.get(body.entry);
      if (h && !h.released) await new Promise((resolve) => (h.waiting = resolve));
      return sendJson(res, 200, { ok: true, count: appends.filter((a) => a.entry === body.entry).length });
    }
    return sendJson(res, 404, { error: "not found" });
  });
}

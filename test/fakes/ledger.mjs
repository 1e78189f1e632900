// A loopback "outside system" with a write that is not idempotent: each POST
// /append records one entry; GET /appends reads them. Tests count both and can
// hold either mid-flight (PUT /_control/hold/<read|append>:<entry>, then
// POST /_control/release/<read|append>:<entry>).
import { listen, readBody, sendJson } from "./http.mjs";

export async function startLedger({ gates } = {}) {
  const appends = [];
  const reads = [];
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
    const held = async (entry) => {
      const h = holds.get(entry);
      if (h && !h.released) await new Promise((resolve) => (h.waiting = resolve));
    };
    if (req.method === "GET" && url.pathname === "/_control/reads") {
      return sendJson(res, 200, reads.filter((r) => r === url.searchParams.get("entry")));
    }
    if (req.method === "GET" && url.pathname === "/appends") {
      const entry = url.searchParams.get("entry");
      if (req.headers["x-ledger-reader"] === "tool") {
        reads.push(entry);
        await held(`read:${entry}`);
      }
      return sendJson(res, 200, appends.filter((a) => entry === null || a.entry === entry));
    }
    if (req.method === "POST" && url.pathname === "/append") {
      const body = JSON.parse(await readBody(req));
      appends.push({ ...body, at: Date.now() });
      await held(`append:${body.entry}`);
      await gates?.pass("ledger", { op: "append", entry: body.entry });
      res.on("finish", () => gates?.tell("ledger", { op: "answered", entry: body.entry }));
      return sendJson(res, 200, { ok: true, count: appends.filter((a) => a.entry === body.entry).length });
    }
    return sendJson(res, 404, { error: "not found" });
  });
}

// A fake webhook callback receiver on loopback: POST /hooks/<name> records each
// delivery with whether its antiproton signature checks out. It can be told to
// fail the next N deliveries (PUT /_control/hooks/<name> {"fail": N, "status"?:
// 503, "secret"?: the tenant's own, which signatures are checked with instead of
// WEBHOOK_SECRET}); those are recorded too, as failures. POST /_control/hold/<name>
// {textIncludes?, ms?}: the next such delivery is recorded but answered only
// after ms, or never.
// GET /_control/hooks/<name> returns { attempts, failures, deliveries }.
import { createHmac, timingSafeEqual } from "node:crypto";
import { Gates } from "./gates.mjs";
import { listen, readBody, sendJson } from "./http.mjs";

export const WEBHOOK_SECRET = "test-webhook-secret";

function signatureValid(headers, raw, secret) {
  const timestamp = headers["x-antiproton-timestamp"] ?? "";
  const given = /^v1=([0-9a-f]{64})$/.exec(headers["x-antiproton-signature"] ?? "")?.[1];
  if (!given || !/^\d+$/.test(timestamp) || Math.abs(Date.now() / 1000 - Number(timestamp)) > 300) return false;
  const expected = createHmac("sha256", secret).update(`${timestamp}.${raw}`).digest();
  return timingSafeEqual(expected, Buffer.from(given, "hex"));
}

export async function startCallbackReceiver({ gates = new Gates() } = {}) {
  const hooks = new Map(); // name → { fail, attempts, deliveries }
  const hook = (name) => {
    if (!hooks.has(name)) hooks.set(name, { fail: 0, status: 503, secret: WEBHOOK_SECRET, attempts: 0, failures: [], deliveries: [] });
    return hooks.get(name);
  };
  return listen(async (req, res) => {
    const url = new URL(req.url, "http://x");
    const control = /^\/_control\/hooks\/([^/]+)$/.exec(url.pathname);
    if (control) {
      const h = hook(decodeURIComponent(control[1]));
      if (req.method === "PUT") {
        const { fail = 0, status = 503, secret = WEBHOOK_SECRET } = JSON.parse(await readBody(req));
        Object.assign(h, { fail, status, secret });
        return sendJson(res, 200, { ok: true });
      }
      return sendJson(res, 200, { attempts: h.attempts, failures: h.failures, deliveries: h.deliveries });
    }
    const hold = /^\/_control\/hold\/([^/]+)$/.exec(url.pathname);
    if (hold && req.method === "POST") {
      const name = decodeURIComponent(hold[1]);
      const { textIncludes = "", ms } = JSON.parse(await readBody(req));
      gates.holdOnce("callback", (d) => d.hook === name && String(d.body.text ?? "").includes(textIncludes), ms ?? Infinity);
      return sendJson(res, 200, { ok: true });
    }
    const target = /^\/hooks\/([^/]+)$/.exec(url.pathname);
    if (req.method !== "POST" || !target) return sendJson(res, 404, { error: "not found" });
    const h = hook(decodeURIComponent(target[1]));
    const raw = await readBody(req);
    h.attempts++;
    const received = { idempotencyKey: req.headers["idempotency-key"] ?? null, signatureValid: signatureValid(req.headers, raw, h.secret), body: JSON.parse(raw) };
    if (h.fail > 0) {
      h.fail--;
      h.failures.push(received);
      return sendJson(res, h.status, { error: "told to fail" });
    }
    h.deliveries.push(received);
    await gates.pass("callback", { hook: decodeURIComponent(target[1]), ...received });
    return sendJson(res, 200, { ok: true });
  });
}

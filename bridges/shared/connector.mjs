// What the Node connectors (Slack Socket Mode, Discord gateway) share: signing
// a forward with bridges/shared/signed-request.ts's scheme, posting it with
// retries, and reading their environment.
import { createHmac } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";

/** v1=HMAC-SHA256("timestamp.body") with the shared secret. */
export function signatureHeaders(secret, body, now = Date.now()) {
  const timestamp = String(Math.floor(now / 1000));
  const mac = createHmac("sha256", secret).update(`${timestamp}.${body}`).digest("hex");
  return { "X-Antiproton-Timestamp": timestamp, "X-Antiproton-Signature": `v1=${mac}` };
}

/**
 * POSTs a signed JSON body to the Worker, retrying (with backoff) while it is
 * unreachable or answers 5xx; a 4xx would be refused again and is returned.
 * Throws only when the last attempt could not reach the Worker.
 */
export async function postSigned({ url, secret }, path, body, attempts) {
  for (let attempt = 1; ; attempt++) {
    try {
      const res = await fetch(`${url.replace(/\/+$/, "")}${path}`, {
        method: "POST",
        headers: { "content-type": "application/json", ...signatureHeaders(secret, body) },
        body,
      });
      if (res.status < 500 || attempt >= attempts) return res;
    } catch (err) {
      if (attempt >= attempts) throw err;
    }
    await sleep(500 * 2 ** (attempt - 1));
  }
}

/** A variable the connector cannot start without; `doc` says where it is explained. */
export function requiredEnv(name, doc) {
  const value = process.env[name];
  if (!value) {
    console.error(`${name} is not set (see ${doc})`);
    process.exit(1);
  }
  return value;
}

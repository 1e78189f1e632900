// Failed credentials are slowed down per client: after a few wrong bearer
// tokens (or console sign-ins) within a minute, the client is answered 429
// with Retry-After until the oldest failure ages out, whatever it sends; a
// success clears its count, and other clients are not touched, so the
// rightful holder is never locked out for more than that minute. Counted per
// isolate: a deployed Worker runs many, so this slows a guesser down rather
// than counting exactly (docs/api.md, "Failed credentials"). A request with no
// client address (one that did not come through Cloudflare's edge, which
// always sets it: `wrangler dev`, the tests) is not counted.
import { HttpError } from "../../lib/http.ts";

const WINDOW_MS = 60_000;
/** Failures a client may make within the window before it must wait. */
export const FAILURES_ALLOWED = 5;
const CLIENTS_KEPT = 10_000;

const failures = new Map<string, number[]>();

/** The client a request comes from: Cloudflare's connecting address, or null where there is none. */
export function clientOf(request: Request): string | null {
  return request.headers.get("cf-connecting-ip");
}

function recent(client: string, now: number): number[] {
  const kept = (failures.get(client) ?? []).filter((at) => at > now - WINDOW_MS);
  if (kept.length === 0) failures.delete(client);
  else failures.set(client, kept);
  return kept;
}

/** 429 while the client has used up its failures; call before checking a credential. */
export function refuseWhileThrottled(client: string | null, now = Date.now()): void {
  if (client === null) return;
  const kept = recent(client, now);
  if (kept.length < FAILURES_ALLOWED) return;
  const seconds = Math.max(1, Math.ceil((kept[0]! + WINDOW_MS - now) / 1000));
  throw new HttpError(429, `too many failed credentials from this client: try again in ${seconds} s`, seconds);
}

export function credentialFailed(client: string | null, now = Date.now()): void {
  if (client === null) return;
  if (failures.size >= CLIENTS_KEPT && !failures.has(client)) failures.clear();
  failures.set(client, [...recent(client, now), now]);
}

export function credentialHeld(client: string | null): void {
  if (client !== null) failures.delete(client);
}

// The one replay rule for every signed request we take: Slack's v0 signatures,
// Discord interactions, and our own signed requests (webhook peers and the
// Node connectors). A request whose timestamp is further than MAX_SKEW_SECONDS
// from now, either way, is refused before its body is read.
import { HttpError } from "../../lib/http.ts";

/** Requests older (or further in the future) than this are replays. */
export const MAX_SKEW_SECONDS = 300;

/**
 * The value of timestamp header `header`: whole Unix seconds within
 * MAX_SKEW_SECONDS of `now` (milliseconds). Anything else is a 401 naming the header.
 */
export function freshTimestamp(header: string, value: string | undefined, now = Date.now()): string {
  if (!value || !/^\d{1,12}$/.test(value) || Math.abs(now / 1000 - Number(value)) > MAX_SKEW_SECONDS) {
    throw new HttpError(401, `missing or stale ${header} (Unix seconds, within ${MAX_SKEW_SECONDS} s of now)`);
  }
  return value;
}

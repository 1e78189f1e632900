// A minimal Slack Web API client over fetch. Slack answers most failures with
// HTTP 200 and {ok:false}, and rate limits with 429 + Retry-After (seconds).
import { retryAfterMs } from "../../lib/http.ts";
import { apiBaseUrl } from "./config.ts";

export type SlackResult =
  | { ok: true; data: Record<string, unknown> }
  | { ok: false; error: string; retryAfterMs?: number; permanent?: boolean; unreachable?: boolean };

/** Errors worth retrying; every other `ok:false` (channel_not_found, invalid_auth…) would fail again. */
const TRANSIENT_ERRORS = new Set(["ratelimited", "internal_error", "fatal_error", "service_unavailable", "request_timeout"]);
/** Refusals after which nothing at all can be posted there (the channel is gone or closed to the app, its token dead). */
const UNREACHABLE_ERRORS = new Set([
  "channel_not_found",
  "not_in_channel",
  "is_archived",
  "invalid_auth",
  "not_authed",
  "token_revoked",
  "token_expired",
  "account_inactive",
  "team_access_not_granted",
  "ekm_access_denied",
]);
const DEFAULT_RETRY_AFTER_MS = 1000;

/** Calls a Web API method. `auth` is a bot token, or null for methods authenticated in the body (oauth.v2.access). */
export async function callSlack(env: Env, method: string, auth: string | null, body: Record<string, unknown> | URLSearchParams): Promise<SlackResult> {
  const form = body instanceof URLSearchParams;
  const headers: Record<string, string> = {
    "content-type": form ? "application/x-www-form-urlencoded" : "application/json; charset=utf-8",
  };
  if (auth) headers.authorization = `Bearer ${auth}`;
  const res = await fetch(`${apiBaseUrl(env)}/${method}`, { method: "POST", headers, body: form ? body.toString() : JSON.stringify(body) });
  if (res.status === 429) {
    await res.body?.cancel();
    return { ok: false, error: `${method}: rate limited`, retryAfterMs: retryAfterMs(res.headers.get("retry-after")) ?? DEFAULT_RETRY_AFTER_MS };
  }
  if (!res.ok) {
    await res.body?.cancel();
    return { ok: false, error: `${method}: HTTP ${res.status}`, permanent: res.status < 500 };
  }
  let data: Record<string, unknown>;
  try {
    data = (await res.json()) as Record<string, unknown>;
  } catch {
    return { ok: false, error: `${method}: the answer was not JSON` };
  }
  if (data.ok === true) return { ok: true, data };
  const error = typeof data.error === "string" ? data.error : "unknown_error";
  if (error === "ratelimited") return { ok: false, error: `${method}: ${error}`, retryAfterMs: retryAfterMs(res.headers.get("retry-after")) ?? DEFAULT_RETRY_AFTER_MS };
  if (UNREACHABLE_ERRORS.has(error)) return { ok: false, error: `${method}: ${error}`, permanent: true, unreachable: true };
  return { ok: false, error: `${method}: ${error}`, permanent: !TRANSIENT_ERRORS.has(error) };
}

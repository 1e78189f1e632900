// What a provider said besides its error text: the response's status and
// headers (when to come back: `retry-after`, `retry-after-ms`,
// `x-ratelimit-reset-*`) and an error's JSON body (OpenAI's `code`). pi-ai
// keeps only the SDK's error message, and its `onResponse` hook sees only a
// successful response, so the one place every SDK's response passes is the
// global fetch: it is wrapped once, and a call made inside `watchResponses`
// gets what its own requests saw (AsyncLocalStorage keeps concurrent calls of
// one isolate apart; a fetch outside a watch passes through untouched).
import { AsyncLocalStorage } from "node:async_hooks";

/** The last response a watched call received. */
export interface SeenResponse {
  status: number;
  headers: Headers;
  /** An error response's body (small JSON), read from a copy: the SDK reads the original. */
  errorBody?: string;
}

const watches = new AsyncLocalStorage<{ seen?: SeenResponse }>();
let wrapped = false;

function wrapFetch(): void {
  if (wrapped) return;
  wrapped = true;
  const original = globalThis.fetch;
  globalThis.fetch = async (input: RequestInfo | URL, init?: RequestInit) => {
    const response = await original(input, init);
    const watch = watches.getStore();
    if (watch) {
      watch.seen = { status: response.status, headers: response.headers };
      if (response.status >= 400) watch.seen.errorBody = await response.clone().text().catch(() => undefined);
    }
    return response;
  };
}

/** Runs `call` and returns its result with the last response its requests received. */
export async function watchResponses<T>(call: () => Promise<T>): Promise<{ result: T; seen?: SeenResponse }> {
  wrapFetch();
  const watch: { seen?: SeenResponse } = {};
  const result = await watches.run(watch, call);
  return { result, seen: watch.seen };
}

/**
 * How long the provider asked us to wait, in seconds (rounded up), from its
 * headers: OpenAI's `retry-after-ms`, then `retry-after` (seconds or an HTTP
 * date; Anthropic, OpenAI, gateways), then OpenAI's `x-ratelimit-reset-*` of
 * the limits it says are used up. Undefined when it said nothing usable.
 */
export function waitFromHeaders(headers: Headers, now = Date.now()): number | undefined {
  const ms = Number(headers.get("retry-after-ms") ?? NaN);
  if (Number.isFinite(ms) && ms >= 0) return Math.ceil(ms / 1000);
  const after = headers.get("retry-after")?.trim();
  if (after) {
    if (/^\d+(\.\d+)?$/.test(after)) return Math.ceil(Number(after));
    const at = Date.parse(after);
    if (Number.isFinite(at)) return Math.max(0, Math.ceil((at - now) / 1000));
  }
  const resets = ["requests", "tokens"]
    .filter((limit) => headers.get(`x-ratelimit-remaining-${limit}`)?.trim() === "0")
    .map((limit) => durationSeconds(headers.get(`x-ratelimit-reset-${limit}`) ?? ""))
    .filter((s): s is number => s !== undefined);
  return resets.length > 0 ? Math.ceil(Math.max(...resets)) : undefined;
}

/** OpenAI's reset durations: "1s", "6m0s", "20ms", "1h2m3.5s". */
function durationSeconds(text: string): number | undefined {
  const parts = [...text.trim().matchAll(/(\d+(?:\.\d+)?)(ms|h|m|s)/g)];
  if (parts.length === 0 || parts.map((p) => p[0]).join("") !== text.trim()) return undefined;
  const unit: Record<string, number> = { h: 3600, m: 60, s: 1, ms: 0.001 };
  return parts.reduce((sum, p) => sum + Number(p[1]) * unit[p[2]!]!, 0);
}

/** The machine-readable code of an error body (`{"error":{"code":"context_length_exceeded",…}}`), if any. */
export function errorCode(body: string | undefined): string | undefined {
  if (!body) return undefined;
  try {
    const code = (JSON.parse(body) as { error?: { code?: unknown } }).error?.code;
    return typeof code === "string" ? code : undefined;
  } catch {
    return undefined;
  }
}

// The Chat API as the app calls it: a service account access token from the
// JWT grant (RFC 7523, signed RS256 with the account's key, cached until a
// minute before it expires), then one JSON call and what its answer means to
// the outbox. Google answers errors as {error: {code, message, status}}: a
// 429 (RESOURCE_EXHAUSTED) is a wait, nothing posted; a 5xx or no answer is
// tried again; a 401 drops the cached token and is tried again; a 403 means
// the app can no longer post there (removed from the space); the rest are
// given up.
import { retryAfterMs } from "../../lib/http.ts";
import { sendTimeoutMs, type DeliveryResult } from "../../runtime/index.ts";
import { apiBaseUrl, serviceAccount, type ServiceAccount } from "./config.ts";

export const CHAT_SCOPE = "https://www.googleapis.com/auth/chat.bot";
/** Google asks for truncated exponential backoff and names no Retry-After: a second, unless it says otherwise. */
const DEFAULT_RETRY_MS = 1_000;

const tokens = new Map<string, { token: string; until: number }>();

const base64url = (bytes: Uint8Array | string) =>
  btoa(typeof bytes === "string" ? bytes : String.fromCharCode(...bytes)).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");

async function signingKey(pem: string): Promise<CryptoKey> {
  const der = Uint8Array.from(atob(pem.replace(/-----[A-Z ]+-----/g, "").replace(/\s+/g, "")), (c) => c.charCodeAt(0));
  return crypto.subtle.importKey("pkcs8", der, { name: "RSASSA-PKCS1-v1_5", hash: "SHA-256" }, false, ["sign"]);
}

/** A signed JWT-grant assertion for the account, good for an hour. */
export async function grantAssertion(account: ServiceAccount, now = Date.now()): Promise<string> {
  const iat = Math.floor(now / 1000);
  const head = base64url(JSON.stringify({ alg: "RS256", typ: "JWT" }));
  const claims = base64url(JSON.stringify({ iss: account.client_email, scope: CHAT_SCOPE, aud: account.token_uri, iat, exp: iat + 3600 }));
  const signature = await crypto.subtle.sign("RSASSA-PKCS1-v1_5", await signingKey(account.private_key), new TextEncoder().encode(`${head}.${claims}`));
  return `${head}.${claims}.${base64url(new Uint8Array(signature))}`;
}

/** The account's access token, from the cache or a new grant; a refused grant throws. */
async function accessToken(account: ServiceAccount, timeoutMs: number): Promise<string> {
  const cached = tokens.get(account.client_email);
  if (cached && cached.until > Date.now()) return cached.token;
  const res = await fetch(account.token_uri, {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded" },
    body: new URLSearchParams({ grant_type: "urn:ietf:params:oauth:grant-type:jwt-bearer", assertion: await grantAssertion(account) }),
    signal: AbortSignal.timeout(timeoutMs),
  });
  const body = (await res.json().catch(() => null)) as { access_token?: unknown; expires_in?: unknown } | null;
  if (!res.ok || typeof body?.access_token !== "string") throw new Error(`Google refused the service account's token grant (${res.status})`);
  const lifetime = typeof body.expires_in === "number" ? body.expires_in : 3600;
  tokens.set(account.client_email, { token: body.access_token, until: Date.now() + (lifetime - 60) * 1000 });
  return body.access_token;
}

export interface ChatAnswer {
  status: number;
  body: { name?: string; error?: { code?: number; message?: string; status?: string } } | null;
  retryAfter: string | null;
}

/** One Chat API call (`path` under /v1, with its query); a network failure, a timeout or a refused grant throws. */
export async function callChat(env: Env, method: "POST" | "PATCH", path: string, query: Record<string, string>, body: unknown): Promise<ChatAnswer> {
  const account = serviceAccount(env);
  const timeoutMs = sendTimeoutMs(env);
  const token = await accessToken(account, timeoutMs);
  const url = new URL(`${apiBaseUrl(env)}/v1/${path}`);
  for (const [k, v] of Object.entries(query)) url.searchParams.set(k, v);
  const res = await fetch(url, {
    method,
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
    body: JSON.stringify(body),
    signal: AbortSignal.timeout(timeoutMs),
  });
  if (res.status === 401) tokens.delete(account.client_email);
  return { status: res.status, body: (await res.json().catch(() => null)) as ChatAnswer["body"], retryAfter: res.headers.get("retry-after") };
}

/** An answer as the outbox reads it; `ref` is the name of the message made or edited. */
export function deliveryOf(answer: ChatAnswer): DeliveryResult {
  const { status, body } = answer;
  if (status >= 200 && status < 300) return typeof body?.name === "string" ? { ok: true, ref: body.name } : { ok: true };
  const error = `Google Chat answered ${status}: ${body?.error?.status ?? ""} ${body?.error?.message ?? ""}`.trim();
  if (status === 429) {
    return { ok: false, error, retryAfterMs: retryAfterMs(answer.retryAfter) ?? DEFAULT_RETRY_MS };
  }
  if (status >= 500 || status === 401) return { ok: false, error };
  return { ok: false, error, permanent: true, ...(status === 403 ? { unreachable: true } : {}) };
}

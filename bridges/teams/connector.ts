// One call to the Bot Connector at a conversation's serviceUrl, with the
// bot's client-credentials token (asked of the token endpoint, kept in the
// isolate until five minutes before it expires; one request for it at a
// time), and what its answer means to the outbox: a 429's Retry-After is a
// wait (nothing was posted), a 401 drops the kept token and is tried again,
// a 5xx or no answer is tried again, 403 and 404 mean the bot can no longer
// post there (removed from the conversation, the app uninstalled).
import { retryAfterMs } from "../../lib/http.ts";
import * as z from "zod";
import { sendTimeoutMs, type DeliveryResult } from "../../runtime/index.ts";
import { appOf, tokenUrl } from "./config.ts";

const SCOPE = "https://api.botframework.com/.default";
const EARLY_MS = 5 * 60 * 1000;

const tokenSchema = z.looseObject({ access_token: z.string().min(1), expires_in: z.coerce.number().positive() });

/** Per token endpoint and app: the token being asked for or held (`until` is Infinity while it is asked for, so every caller shares one request). */
const tokens = new Map<string, { asking: Promise<string>; token?: string; until: number }>();

async function askToken(env: Env): Promise<{ token: string; until: number }> {
  const app = appOf(env);
  const res = await fetch(tokenUrl(env), {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded" },
    body: new URLSearchParams({ grant_type: "client_credentials", client_id: app.id, client_secret: app.password, scope: SCOPE }),
    signal: AbortSignal.timeout(sendTimeoutMs(env)),
  });
  const parsed = tokenSchema.safeParse(await res.json().catch(() => null));
  if (!res.ok || !parsed.success) throw new Error(`the token endpoint answered ${res.status}${parsed.success ? "" : " without a token"}`);
  return { token: parsed.data.access_token, until: Date.now() + parsed.data.expires_in * 1000 - EARLY_MS };
}

const tokenKey = (env: Env) => `${tokenUrl(env)}\n${appOf(env).id}`;

/** The bot's Connector token: the kept one while it has five minutes left, else a new one (looked up without a pause, so callers at once share one request). */
function connectorToken(env: Env): Promise<string> {
  const key = tokenKey(env);
  const held = tokens.get(key);
  if (held && held.until > Date.now()) return held.asking;
  const entry: { asking: Promise<string>; token?: string; until: number } = { asking: Promise.resolve(""), until: Infinity };
  entry.asking = askToken(env).then(
    ({ token, until }) => {
      Object.assign(entry, { token, until });
      return token;
    },
    (err: unknown) => {
      if (tokens.get(key) === entry) tokens.delete(key);
      throw err;
    },
  );
  tokens.set(key, entry);
  return entry.asking;
}

/** A token the Connector refused is dropped, unless a newer one already took its place. */
function dropToken(env: Env, token: string): void {
  const key = tokenKey(env);
  if (tokens.get(key)?.token === token) tokens.delete(key);
}

export interface ConnectorAnswer {
  status: number;
  body: { id?: unknown; error?: { code?: string; message?: string } } | null;
  retryAfter: string | null;
}

/** `method` `path` (under the serviceUrl, e.g. /v3/conversations/<id>/activities) with a JSON body; a network failure or a timeout throws. */
export async function callConnector(env: Env, serviceUrl: string, method: "POST" | "PUT", path: string, body: unknown): Promise<ConnectorAnswer> {
  const token = await connectorToken(env);
  const res = await fetch(`${serviceUrl.replace(/\/+$/, "")}${path}`, {
    method,
    headers: { "content-type": "application/json", authorization: `Bearer ${token}` },
    body: JSON.stringify(body),
    signal: AbortSignal.timeout(sendTimeoutMs(env)),
  });
  if (res.status === 401) dropToken(env, token);
  const answer = (await res.json().catch(() => null)) as ConnectorAnswer["body"];
  return { status: res.status, body: answer, retryAfter: res.headers.get("retry-after") };
}

/** An answer as the outbox reads it; `ref` is the id of the activity a POST made. */
export function deliveryOf(answer: ConnectorAnswer): DeliveryResult {
  if (answer.status >= 200 && answer.status < 300) return typeof answer.body?.id === "string" ? { ok: true, ref: answer.body.id } : { ok: true };
  const error = `Teams answered ${answer.status}: ${answer.body?.error?.message ?? answer.body?.error?.code ?? "no description"}`;
  if (answer.status === 429) return { ok: false, error, retryAfterMs: Math.max(1000, retryAfterMs(answer.retryAfter) ?? 0) };
  if (answer.status >= 500 || answer.status === 401) return { ok: false, error };
  return { ok: false, error, permanent: true, ...(answer.status === 403 || answer.status === 404 ? { unreachable: true } : {}) };
}

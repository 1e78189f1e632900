// Helpers shared by the workerd tests: the Agents API, polling, and the fakes' control APIs.
import { env, exports } from "cloudflare:workers";
import type { Card } from "../approvals/index.ts";

const ADMIN = { authorization: "Bearer test-admin-token" };
const testEnv = env as unknown as Record<string, string>;

export function worker(path: string, init: RequestInit = {}): Promise<Response> {
  return exports.default.fetch(new Request(`http://antiproton.test${path}`, init));
}

export function postMessage(tenant: string, agent: string, body: unknown, headers: Record<string, string> = {}): Promise<Response> {
  return worker(`/v1/tenants/${tenant}/agents/${agent}/messages`, {
    method: "POST",
    headers: { ...ADMIN, "content-type": "application/json", ...headers },
    body: JSON.stringify(body),
  });
}

export interface View {
  status: string;
  error: string | null;
  usage: { inputTokens: number; outputTokens: number; cost: number };
  transcript: {
    role: string;
    text: string;
    toolCalls?: { id: string; name: string; arguments: unknown }[];
    toolCallId?: string;
    steer?: boolean;
    isError?: boolean;
  }[];
  holds: Card[];
}

/** Chooses each tenant's model through the admin API (`tenant → <provider>/<model>`). */
export async function chooseModels(tenantModels: Record<string, string>): Promise<void> {
  for (const [tenant, model] of Object.entries(tenantModels)) {
    const res = await worker(`/v1/tenants/${tenant}/model`, { method: "PUT", headers: { ...ADMIN, "content-type": "application/json" }, body: JSON.stringify({ model }) });
    if (res.status !== 200) throw new Error(`choosing ${model} for ${tenant}: ${res.status} ${await res.text()}`);
  }
}

export async function getConversation(tenant: string, agent: string, id: string): Promise<View> {
  const res = await worker(`/v1/tenants/${tenant}/agents/${agent}/conversations/${id}`, { headers: ADMIN });
  if (res.status !== 200) throw new Error(`GET conversation ${id}: ${res.status} ${await res.text()}`);
  return res.json();
}

/** Polls until `check` returns a value (not undefined/false) or the deadline passes. */
export async function waitFor<T>(what: string, check: () => Promise<T | undefined | false>, timeoutMs = 15_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const value = await check();
      if (value !== undefined && value !== false) return value;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}${last ? `: ${String(last)}` : ""}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

export function settled(tenant: string, agent: string, id: string, timeoutMs?: number): Promise<View> {
  return waitFor(
    `conversation ${id} to settle`,
    async () => {
      const view = await getConversation(tenant, agent, id);
      return view.status === "idle" || view.status === "failed" ? view : undefined;
    },
    timeoutMs,
  );
}

/** Waits until the conversation is idle with `text` as its last entry (the agent's answer to a later step). */
export function answered(tenant: string, agent: string, id: string, text: string): Promise<View> {
  return waitFor(`"${text}" in ${id}`, async () => {
    const view = await getConversation(tenant, agent, id);
    return view.status === "idle" && view.transcript.at(-1)?.text === text ? view : undefined;
  });
}

export interface ScriptStep {
  text?: string;
  toolCalls?: { name: string; arguments?: unknown; id?: string }[];
  /** Tokens the fake reports, each API in its own fields; input excludes cached. */
  usage?: { input?: number; cached?: number; cacheWrite?: number; output?: number };
  status?: number;
  error?: string;
  headers?: Record<string, string>;
  /** OpenAI's error code on an error step, e.g. "context_length_exceeded". */
  code?: string;
  /** Gemini's RetryInfo on an error step, e.g. "7s". */
  retryDelay?: string;
  /** Gemini: a 200 whose body is an error object with this code, as a begun answer fails. */
  errorInStream?: number;
  hold?: boolean;
  /** This long before the step answers, as a slow model does. */
  delayMs?: number;
  echoToolResults?: boolean;
  /** Stream arguments (and text) in pieces of this many characters, cut mid-JSON. */
  argumentChunk?: number;
  /** Send parallel tool calls round-robin, chunk by chunk. */
  interleave?: boolean;
  /** Chat Completions: each piece of text (argumentChunk characters) this long after the one before. */
  chunkDelayMs?: number;
  /** Chat Completions: the text stops after this many pieces until the scenario is released (releaseProvider). */
  holdAfter?: number;
  /** Anthropic Messages: the stream is cut off once the answer has begun (its usage so far reported). */
  cut?: boolean;
}

export async function script(id: string, steps: ScriptStep[]): Promise<void> {
  const res = await fetch(`${testEnv.FAKE_PROVIDER_URL}/_control/scenarios/${id}`, { method: "PUT", body: JSON.stringify({ steps }) });
  if (!res.ok) throw new Error(`script ${id}: ${res.status}`);
}

export interface ProviderRequest {
  /** The pi-ai API whose wire protocol the request spoke. */
  api: string;
  path: string;
  /** Chat Completions' shape; the other APIs' bodies are read with their own. */
  body: { messages: { role: string; content: unknown }[]; tools?: unknown[] } & Record<string, unknown>;
  headers: Record<string, string>;
  authorized: boolean;
  /** Whose key it carried, once authorized. */
  key?: "operator" | "tenant";
  responded?: boolean;
  /** When it arrived, and when its answer ended (ms). */
  at: number;
  endedAt?: number;
  /** The usage the fake reported, in the API's own fields. */
  usage?: Record<string, unknown>;
}

/** The system prompt of a Chat Completions request. */
export const systemOf = (request: ProviderRequest) => request.body.messages[0]!.content as string;

export async function providerRequests(id: string): Promise<ProviderRequest[]> {
  return (await fetch(`${testEnv.FAKE_PROVIDER_URL}/_control/scenarios/${id}/requests`)).json();
}

export async function releaseProvider(id: string): Promise<void> {
  await fetch(`${testEnv.FAKE_PROVIDER_URL}/_control/scenarios/${id}/release`, { method: "POST" });
}

export async function ledgerAppends(entry: string): Promise<{ entry: string; key: string }[]> {
  return (await fetch(`${testEnv.FAKE_LEDGER_URL}/appends?entry=${encodeURIComponent(entry)}`)).json();
}

export async function ledgerReads(entry: string): Promise<string[]> {
  return (await fetch(`${testEnv.FAKE_LEDGER_URL}/_control/reads?entry=${encodeURIComponent(entry)}`)).json();
}

export async function holdLedger(op: "read" | "append", entry: string): Promise<void> {
  await fetch(`${testEnv.FAKE_LEDGER_URL}/_control/hold/${op}:${encodeURIComponent(entry)}`, { method: "PUT" });
}

export async function releaseLedger(op: "read" | "append", entry: string): Promise<void> {
  await fetch(`${testEnv.FAKE_LEDGER_URL}/_control/release/${op}:${encodeURIComponent(entry)}`, { method: "POST" });
}

export function unique(prefix: string): string {
  return `${prefix}${crypto.randomUUID().replaceAll("-", "").slice(0, 12)}`;
}

/**
 * Runs `fn` with some configuration variables changed, then puts them back. In
 * the pool the Worker, the objects and the queue consumer share this one env, so
 * this is how a test shows what a misconfigured deployment answers.
 */
export async function withVars<T>(vars: Record<string, string | undefined>, fn: () => Promise<T>): Promise<T> {
  const target = env as unknown as Record<string, string | undefined>;
  const saved = Object.fromEntries(Object.keys(vars).map((k) => [k, target[k]]));
  Object.assign(target, vars);
  try {
    return await fn();
  } finally {
    Object.assign(target, saved);
  }
}

/** A console session's cookie, signed in as a browser on the console's own origin posts it. */
export async function consoleCookie(token = "test-admin-token"): Promise<string> {
  const res = await worker("/console/login", {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded", origin: "http://antiproton.test" },
    body: new URLSearchParams({ token }).toString(),
    redirect: "manual",
  });
  if (res.status !== 303) throw new Error(`console sign-in: ${res.status}`);
  return res.headers.get("set-cookie")!.split(";")[0]!;
}

/** A 1×1 PNG, as a file a person shares. */
export const PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==";

/** The scenario's first request's last user message, as Anthropic Messages parts (a model that takes images), and their text joined. */
export async function sharedWithModel(scenario: string): Promise<{ parts: { type: string; text?: string; source?: unknown }[]; text: string }> {
  const [request] = await providerRequests(scenario);
  const parts = (request!.body.messages as { role: string; content: unknown }[]).filter((m) => m.role === "user").at(-1)!.content as { type: string; text?: string; source?: unknown }[];
  return { parts, text: parts.map((part) => part.text ?? "").join("\n") };
}

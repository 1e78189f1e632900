// Google Chat as a test sees it: events posted to the app's endpoint with a
// bearer JWT signed by the fake's Chat key (served on its certificate URL),
// recorded payloads replayed under new space and message ids, and the fake
// Chat API's record of what the app posted.
import { env } from "cloudflare:workers";
import { worker } from "../../support.ts";

const E = env as unknown as Record<string, string>;
export const AGENT = "assistant";
/** The tenant of events that name no Workspace customer (GCHAT_TENANT's default). */
export const TENANT = "gchat";

const encode = (value: unknown) => btoa(JSON.stringify(value)).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");

export interface TokenClaims {
  iss?: string;
  aud?: string;
  iat?: number;
  exp?: number;
  email?: string;
  email_verified?: boolean;
}

/** A token as Chat signs it: RS256 under `key` (the fake's, by default), kid naming it. */
export async function chatToken(claims: TokenClaims = {}, { key, kid = "fake-chat-key-1" }: { key?: CryptoKey; kid?: string } = {}): Promise<string> {
  const signing = key ?? (await crypto.subtle.importKey("jwk", JSON.parse(E.FAKE_GCHAT_SIGNING_KEY!), { name: "RSASSA-PKCS1-v1_5", hash: "SHA-256" }, false, ["sign"]));
  const now = Math.floor(Date.now() / 1000);
  const body = `${encode({ alg: "RS256", kid, typ: "JWT" })}.${encode({ iss: "chat@system.gserviceaccount.com", aud: E.GCHAT_AUDIENCE, iat: now, exp: now + 3600, ...claims })}`;
  const signature = new Uint8Array(await crypto.subtle.sign("RSASSA-PKCS1-v1_5", signing, new TextEncoder().encode(body)));
  return `${body}.${btoa(String.fromCharCode(...signature)).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "")}`;
}

/** Chat posting an event to the app's endpoint; `token: null` sends none. */
export async function deliver(event: unknown, { token }: { token?: string | null } = {}): Promise<Response> {
  const bearer = token === undefined ? await chatToken() : token;
  const headers: Record<string, string> = { "content-type": "application/json" };
  if (bearer !== null) headers.authorization = `Bearer ${bearer}`;
  return worker("/gchat/events", { method: "POST", headers, body: typeof event === "string" ? event : JSON.stringify(event) });
}

let next = Math.floor(Math.random() * 1e9);
/** A fresh id of letters and digits, as Chat's space, thread and message ids are. */
export const fresh = (prefix = "T") => `${prefix}${(++next).toString(36)}`;

/** A recorded payload with its ids (each old → new) replaced everywhere. */
export function replay<T>(recorded: T, ids: Record<string, string>): T {
  let text = JSON.stringify(recorded);
  for (const [from, to] of Object.entries(ids)) text = text.replaceAll(from, to);
  return JSON.parse(text) as T;
}

export interface Message {
  name: string;
  text: string;
  shown: string;
  thread: { name: string };
  cardsV2: { cardId: string; card: { sections: { widgets: { textParagraph?: { text: string }; buttonList?: { buttons: { text: string; onClick: { action: { function: string; parameters: { key: string; value: string }[] } } }[] } }[] }[] } }[];
}
export interface Call {
  method: "POST" | "PATCH";
  space: string;
  name?: string;
  status: number;
  held?: boolean;
  query: Record<string, string>;
  body: { text?: string; thread?: { name: string }; cardsV2?: unknown[] };
}

export async function messagesIn(space: string): Promise<Message[]> {
  return (await fetch(`${E.FAKE_GCHAT_URL}/_control/messages?space=${space}`)).json();
}
export async function calls(space: string): Promise<Call[]> {
  return (await fetch(`${E.FAKE_GCHAT_URL}/_control/calls?space=${space}`)).json();
}
export async function grants(): Promise<number> {
  return ((await (await fetch(`${E.FAKE_GCHAT_URL}/_control/grants`)).json()) as { grants: number }).grants;
}
/** How often the Worker fetched the certificate URL. */
export async function certFetches(): Promise<number> {
  return ((await (await fetch(`${E.FAKE_GCHAT_URL}/_control/grants`)).json()) as { certFetches: number }).certFetches;
}
export async function control(path: string, body: unknown): Promise<void> {
  const res = await fetch(`${E.FAKE_GCHAT_URL}/_control/${path}`, { method: "POST", body: JSON.stringify(body) });
  if (!res.ok) throw new Error(`fake Google Chat ${path}: ${res.status}`);
}

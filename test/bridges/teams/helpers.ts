// Teams as a test sees it: activities delivered to the bot's messaging
// endpoint with a token the fake Bot Framework signed (its loopback RSA key,
// published in its JWKS), recorded activities replayed with new ids and the
// fake's serviceUrl, and the fake Connector's record of what the bot did.
import { env } from "cloudflare:workers";
import recorded from "../../fixtures/teams/teams.json";
import { conversationOf } from "../../../bridges/teams/address.ts";
import { worker } from "../../support.ts";

const E = env as unknown as Record<string, string>;
export const FAKE = E.FAKE_TEAMS_URL!;
export const SERVICE_URL = `${FAKE}/amer/`;
export const TENANT = recorded.mention.conversation.tenantId;
export const AGENT = "assistant";

/** A token as the Bot Framework signs it for an activity; `claims` replace its defaults (issuer, audience = the app id, an hour's expiry, serviceurl = the fake's). */
export async function sign(claims: Record<string, unknown> = {}, key: "published" | "unpublished" = "published"): Promise<string> {
  const res = await fetch(`${FAKE}/_control/sign`, { method: "POST", body: JSON.stringify({ claims, key }) });
  return ((await res.json()) as { token: string }).token;
}

/** The Bot Framework delivering an activity to the bot; `token: null` sends none. */
export async function deliver(activity: unknown, { token }: { token?: string | null } = {}): Promise<Response> {
  const bearer = token === undefined ? await sign() : token;
  const headers: Record<string, string> = { "content-type": "application/json" };
  if (bearer !== null) headers.authorization = `Bearer ${bearer}`;
  return worker("/teams/api/messages", { method: "POST", headers, body: typeof activity === "string" ? activity : JSON.stringify(activity) });
}

let next = Math.floor(Math.random() * 1e9);
/** A fresh activity id or a fresh part of a conversation id. */
export const fresh = () => String(++next);

/** The runtime's id for a Teams conversation, as the bridge makes it. */
export const conversationKey = conversationOf;

export interface Call {
  method: "POST" | "PUT";
  conversation: string;
  activityId?: string;
  status: number;
  held?: boolean;
  activity: {
    type: string;
    text?: string;
    textFormat?: string;
    replyToId?: string;
    attachments?: { contentType: string; content: AdaptiveCard }[];
    entities?: { type: string; streamId?: string; streamType?: string; streamSequence?: number }[];
  };
}

export interface AdaptiveCard {
  type: string;
  version: string;
  body: { type: string; text: string }[];
  actions: { type: string; title: string; verb: string; data: { holdDecision: string } }[];
}

export async function calls(conversation: string): Promise<Call[]> {
  return (await fetch(`${FAKE}/_control/calls?conversation=${encodeURIComponent(conversation)}`)).json();
}

export interface Shown {
  id: string;
  text: string;
  attachments: { contentType: string; content: AdaptiveCard }[] | null;
  updated?: number;
  streaming?: boolean;
}

/** The conversation's messages as they stand. */
export async function messagesIn(conversation: string): Promise<Shown[]> {
  return (await fetch(`${FAKE}/_control/messages?conversation=${encodeURIComponent(conversation)}`)).json();
}

export async function control(path: string, body: unknown): Promise<void> {
  const res = await fetch(`${FAKE}/_control/${path}`, { method: "POST", body: JSON.stringify(body) });
  if (!res.ok) throw new Error(`fake Teams ${path}: ${res.status}`);
}

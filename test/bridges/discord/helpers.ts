// Discord requests signed the way Discord signs them (Ed25519 with the test key
// from PROTOCOLS §4, computed here independently of the bridge) and recorded
// payloads replayed with new ids.
import { env } from "cloudflare:workers";
import recorded from "../../fixtures/discord/discord.json";
import { signatureHeaders } from "../../../bridges/shared/signed-request.ts";
import { worker } from "../../support.ts";

const E = env as unknown as Record<string, string>;

const PKCS8_ED25519_PREFIX = "302e020100300506032b657004220420";
const hexBytes = (hex: string) => Uint8Array.from(hex.match(/../g)!, (b) => parseInt(b, 16));
const toHex = (buf: ArrayBuffer) => [...new Uint8Array(buf)].map((b) => b.toString(16).padStart(2, "0")).join("");

export async function ed25519(message: string): Promise<string> {
  const key = await crypto.subtle.importKey("pkcs8", hexBytes(PKCS8_ED25519_PREFIX + E.DISCORD_TEST_SIGNING_KEY), { name: "Ed25519" }, false, ["sign"]);
  return toHex(await crypto.subtle.sign({ name: "Ed25519" }, key, new TextEncoder().encode(message)));
}

export const now = () => String(Math.floor(Date.now() / 1000));

interface Sent {
  timestamp?: string | null;
  signature?: string | null;
  contentType?: string;
}

export async function interact(body: unknown, sent: Sent = {}): Promise<Response> {
  const raw = typeof body === "string" ? body : JSON.stringify(body);
  const timestamp = sent.timestamp === undefined ? now() : sent.timestamp;
  const headers: Record<string, string> = { "content-type": sent.contentType ?? "application/json" };
  if (timestamp !== null) headers["x-signature-timestamp"] = timestamp;
  const signature = sent.signature === undefined ? await ed25519((timestamp ?? "") + raw) : sent.signature;
  if (signature !== null) headers["x-signature-ed25519"] = signature;
  return worker("/discord/interactions", { method: "POST", headers, body: raw });
}

/** A gateway message as the discord.js connector forwards it, signed with the shared secret. */
export async function forward(message: unknown): Promise<Response> {
  const body = JSON.stringify(message);
  const headers = { "content-type": "application/json", ...(await signatureHeaders(E.DISCORD_GATEWAY_SECRET!, body)) };
  return worker("/discord/gateway-events", { method: "POST", headers, body });
}

export const snowflake = () => String(1_500_000_000_000_000_000n + BigInt(Math.floor(Math.random() * 1e15)));

/** The recorded button click, as a click on `customId` in this channel by this user (in `guildId`, if given). */
export function click(channelId: string, customId: string, user: { id: string; username: string; global_name: string | null }, guildId?: string) {
  const recordedClick = recorded.buttonClickHello;
  return {
    ...recordedClick,
    id: snowflake(),
    channel_id: channelId,
    ...(guildId ? { guild_id: guildId } : {}),
    member: { ...recordedClick.member, user: { ...recordedClick.member.user, ...user } },
    data: { ...recordedClick.data, custom_id: customId },
  };
}


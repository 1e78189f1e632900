// POST /discord/gateway-events: channel messages forwarded by the gateway
// connector (bridges/discord/gateway.mjs), signed with DISCORD_GATEWAY_SECRET.
// The body is Discord's own message object, as MESSAGE_CREATE carries it.
import type { Context } from "hono";
import { z } from "zod";
import { secretNamed } from "../../lib/config.ts";
import { HttpError, parseJson } from "../../lib/http.ts";
import { submitEvent } from "../../runtime/index.ts";
import { readSignedBody } from "../shared/signed-request.ts";
import { channelAddress, chatUser, discordRoute } from "./routing.ts";

const MAX_BODY_BYTES = 64 * 1024;

const gatewayMessageSchema = z.object({
  id: z.string(),
  channel_id: z.string(),
  guild_id: z.string().nullish(),
  content: z.string(),
  webhook_id: z.string().nullish(),
  author: z.object({ id: z.string(), username: z.string().optional(), global_name: z.string().nullish(), bot: z.boolean().optional() }),
});

export async function handleGatewayMessage(c: Context<{ Bindings: Env }>): Promise<Response> {
  const secret = secretNamed(c.env, "DISCORD_GATEWAY_SECRET");
  if (!secret) throw new HttpError(503, "DISCORD_GATEWAY_SECRET is not configured");
  const raw = await readSignedBody(c, secret, { contentTypes: ["application/json"], maxBytes: MAX_BODY_BYTES });
  const parsed = gatewayMessageSchema.safeParse(parseJson(raw));
  if (!parsed.success) throw new HttpError(422, z.prettifyError(parsed.error));
  const message = parsed.data;
  // The agent never answers a bot, itself included, nor a webhook's post.
  if (message.author.bot || message.webhook_id) return c.json({ ignored: "the author is a bot" });
  const text = withoutBotMention(message.content, secretNamed(c.env, "DISCORD_APPLICATION_ID")).trim();
  if (text === "") return c.json({ ignored: "no text" });

  const route = discordRoute(c.env, message.guild_id, message.author);
  const result = await submitEvent(c.env, route, {
    // The message id: a message forwarded twice (a connector retry, two connectors) is one event.
    id: `discord:message:${message.id}`,
    kind: "message",
    conversation: message.channel_id,
    user: chatUser(message.author),
    text,
    replyTo: channelAddress(message.channel_id),
  });
  return c.json(result, result.accepted ? 202 : 200);
}

/** "<@bot> do this" reads as "do this" to the agent. */
function withoutBotMention(content: string, botId: string | undefined): string {
  return botId && /^\d+$/.test(botId) ? content.replace(new RegExp(`<@!?${botId}>`, "g"), "") : content;
}

// Discord's ids, and the reply address the ingress writes and the outbound
// reads back. Everything here ends up in a REST path, so it is checked on the
// way in and again on the way out (a stored address is data, not a promise).
import * as z from "zod";
import type { ReplyAddress } from "../../runtime/index.ts";

/** Discord's ids are snowflakes: decimal digits (64-bit). */
export const snowflake = z.string().regex(/^\d{1,20}$/, "a Discord id (snowflake: digits only)");
/** Interaction tokens name the interaction's webhook: base64url-like text. */
export const interactionToken = z.string().regex(/^[A-Za-z0-9._-]{1,500}$/, "an interaction token (letters, digits, . _ -)");

/**
 * Where a conversation's replies go: the channel, and for an /ask, the
 * interaction's webhook, which answers for 15 minutes; after that the bot token
 * posts to the channel, so the token's issue time travels with it.
 */
export const targetSchema = z.object({
  channelId: snowflake,
  applicationId: snowflake.optional(),
  interactionToken: interactionToken.optional(),
  interactionIssuedAt: z.number().optional(),
});
export type DiscordTarget = z.infer<typeof targetSchema>;

export function discordAddress(target: DiscordTarget): ReplyAddress {
  return { platform: "discord", target: { ...target } };
}

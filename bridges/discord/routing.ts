// Where a Discord event goes: tenant = guild (a DM: the person), conversation =
// the channel (a thread is its own channel), agent = DISCORD_AGENT.
import { parseRoute, type ChatUser, type ReplyAddress, type Route } from "../../runtime/index.ts";

export const DEFAULT_AGENT = "assistant";

export interface DiscordUser {
  id: string;
  username?: string;
  global_name?: string | null;
}

export function discordRoute(env: Env, guildId: string | undefined | null, user: DiscordUser): Route {
  const agent = env.DISCORD_AGENT?.trim() || DEFAULT_AGENT;
  return parseRoute(guildId ? guildId : `dm-${user.id}`, agent);
}

export function chatUser(user: DiscordUser): ChatUser {
  return { platform: "discord", id: user.id, name: user.global_name ?? user.username };
}

/**
 * The reply address of a conversation. An interaction's token lets the app answer
 * through the interaction webhook for 15 minutes; after that the bot token posts
 * to the channel, so the token's issue time travels with it.
 */
export function channelAddress(channelId: string): ReplyAddress {
  return { platform: "discord", target: { channelId } };
}

export function interactionAddress(channelId: string, applicationId: string, token: string, issuedAt: number): ReplyAddress {
  return { platform: "discord", target: { channelId, applicationId, interactionToken: token, interactionIssuedAt: issuedAt } };
}

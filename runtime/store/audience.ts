// Who can read a conversation: one person in a direct message, or the
// workspace's channels. The one place that reads each bridge's ids for it
// (plugins such as memory scope what they keep by it, so a note made in a DM
// never reaches a channel).
import type { Audience } from "../../plugins/index.ts";
import type { ChatUser, ReplyAddress, Route } from "../chat.ts";
import type { ConversationRow } from "./conversations.ts";

/**
 * - Slack: a DM is an `im` channel, whose id starts with `D`.
 * - Discord: DMs have no guild; the bridge routes them to the tenant `dm-<user>`.
 * - The webhook, the Agents API and the console have no DMs: their
 *   conversations belong to the workspace's channels.
 * A DM's person is whoever started the conversation (nobody else can write in it).
 */
export function audienceOf(route: Route, conv: ConversationRow): Audience {
  const by = JSON.parse(conv.started_by) as ChatUser;
  const address = conv.reply_to ? (JSON.parse(conv.reply_to) as ReplyAddress) : null;
  const direct =
    (by.platform === "slack" && address?.platform === "slack" && /^D[A-Z0-9]+$/.test(String(address.target.channel ?? ""))) ||
    (by.platform === "discord" && route.tenant.startsWith("dm-"));
  return direct ? { kind: "dm", person: `${by.platform}:${by.id}` } : { kind: "channel" };
}

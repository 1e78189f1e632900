// Teams' ids and the reply address the ingress writes and the outbound reads
// back: the Connector (serviceUrl) and the Teams conversation (a channel's
// thread, a group chat, a 1:1 chat). A stored address is data, not a
// promise: it is checked again on the way out.
import * as z from "zod";
import { sha256Hex } from "../../lib/http.ts";
import { CONVERSATION_ID, type ReplyAddress } from "../../runtime/index.ts";

export const targetSchema = z.object({
  /** The Connector the conversation is reached through, as the verified activity named it. */
  serviceUrl: z.url(),
  /** Teams' conversation id: a channel thread's ends ";messageid=<the thread's first message>". */
  conversationId: z.string().min(1).max(1000),
  /** A 1:1 chat (conversationType "personal"). */
  direct: z.boolean(),
});
export type TeamsTarget = z.infer<typeof targetSchema>;

export function teamsAddress(target: TeamsTarget): ReplyAddress {
  return { platform: "teams", target: { ...target } };
}

/**
 * The runtime's id for a Teams conversation: its id with every character the
 * runtime does not take (and _) written _xx, so two Teams ids never meet
 * ("19:…@thread.tacv2;messageid=1" reads "19:…_40thread.tacv2_3bmessageid_3d1");
 * one that would pass 200 characters is "teams-" and its SHA-256.
 */
export async function conversationOf(teamsId: string): Promise<string> {
  const escaped = teamsId.replace(/[^A-Za-z0-9:.-]/g, (ch) => [...new TextEncoder().encode(ch)].map((b) => `_${b.toString(16).padStart(2, "0")}`).join(""));
  return CONVERSATION_ID.test(escaped) ? escaped : `teams-${(await sha256Hex(teamsId)).slice(0, 40)}`;
}

/** The Connector path of a conversation's activities (and of one of them). */
export const activitiesPath = (conversationId: string, activityId?: string) =>
  `/v3/conversations/${encodeURIComponent(conversationId)}/activities${activityId === undefined ? "" : `/${encodeURIComponent(activityId)}`}`;

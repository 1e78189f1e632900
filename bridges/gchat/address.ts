// Google Chat's names and the reply address the ingress writes and the
// outbound reads back: a space, and outside a DM the thread a conversation
// lives in. A stored address is data, not a promise: it is checked again on
// the way out.
import * as z from "zod";
import type { ReplyAddress } from "../../runtime/index.ts";

/** A space's resource name, spaces/<id>. */
export const spaceName = z.string().regex(/^spaces\/[A-Za-z0-9_-]{1,100}$/, "a space's name (spaces/<id>)");
/** A thread's resource name, spaces/<id>/threads/<id>. */
export const threadName = z.string().regex(/^spaces\/[A-Za-z0-9_-]{1,100}\/threads\/[A-Za-z0-9_.-]{1,100}$/, "a thread's name (spaces/<id>/threads/<id>)");
/** A message's resource name, spaces/<id>/messages/<id>: what an edit names. */
export const messageName = z.string().regex(/^spaces\/[A-Za-z0-9_-]{1,100}\/messages\/[A-Za-z0-9_.-]{1,100}$/, "a message's name");

export const targetSchema = z.object({
  space: spaceName,
  /** The thread replies go in; none in a DM, which is one conversation. */
  thread: threadName.optional(),
  /** A direct message with the app. */
  direct: z.boolean(),
});
export type GchatTarget = z.infer<typeof targetSchema>;

export const gchatAddress = (target: GchatTarget): ReplyAddress => ({ platform: "gchat", target: { ...target } });

const lastPart = (name: string) => name.slice(name.lastIndexOf("/") + 1);

/** A DM is one conversation, `space-<id>`; in a space each thread is its own, `space-<id>:<thread id>`. */
export const conversationOf = (target: GchatTarget): string =>
  target.thread === undefined ? `space-${lastPart(target.space)}` : `space-${lastPart(target.space)}:${lastPart(target.thread)}`;

/** users/<id> → <id>: the person's id within the tenant. */
export const userIdOf = (name: string): string => lastPart(name);

// Followers of a conversation, told rather than asking (issue 40): each is a
// WebSocket from the Worker serving a follow (runtime/responses/follow.ts),
// accepted with the hibernation API, so an object whose followers wait while
// nothing happens runs no handler and arms no alarm. Every call into the
// object and every pass ends with `tell`, which sends each socket the feed's
// events after the last one it was sent. That id is kept on the socket (its
// attachment), so a follower is told each event once and in order even across
// the object's hibernation; the output gate holds a send until what it
// reports is durable. Why a socket and not a poll: docs/design.md, "Followers".
import * as z from "zod";
import type { Route } from "../chat.ts";
import { feedAfter, feedLast } from "./feed.ts";

/** What a follow asks for, as the Worker sends it in the upgrade's URL (followRequest) and the object reads it. */
export const followAsk = z.object({
  tenant: z.string().min(1),
  agent: z.string().min(1),
  conversation: z.string().min(1).max(200),
  after: z.coerce.number().int().nonnegative(),
});
export type FollowAsk = z.infer<typeof followAsk>;

/** The upgrade a Worker sends the agent's object to follow a conversation from event id `after`. */
export function followRequest(route: Route, conversation: string, after: number): Request {
  const query = new URLSearchParams({ tenant: route.tenant, agent: route.agent, conversation, after: String(after) });
  return new Request(`https://agent-object/follow?${query}`, { headers: { upgrade: "websocket" } });
}

/** The close code an object ends a follow with when there is nothing more to follow (the conversation or the agent was deleted). */
export const FOLLOW_GONE = 4404;

/** Where a socket is in its conversation's feed: the last row it was told of. */
const place = z.object({ conversation: z.string(), after: z.number() });

export class Followers {
  constructor(
    private readonly ctx: DurableObjectState,
    /** The object's route, null before it has one: a follower of an unused object is told nothing. */
    private readonly route: () => Route | null,
  ) {}

  /** A follower's socket, its end for the Worker; the call that opened it tells it what it missed when it ends. */
  accept(conversation: string, after: number): Response {
    const [client, server] = Object.values(new WebSocketPair()) as [WebSocket, WebSocket];
    this.ctx.acceptWebSocket(server, [conversation]);
    server.serializeAttachment({ conversation, after } satisfies z.infer<typeof place>);
    return new Response(null, { status: 101, webSocket: client });
  }

  /**
   * Sends every open socket the events written after the last it was told of,
   * one message each (a FeedEvent as JSON). Followers at the same place share
   * one read; with no follower, or nothing new, it reads one index entry at most.
   */
  tell(): void {
    const sockets = this.ctx.getWebSockets();
    const route = sockets.length > 0 ? this.route() : null;
    if (!route) return;
    const sql = this.ctx.storage.sql;
    const last = feedLast(sql);
    const told = new Map<string, { messages: string[]; after: number }>();
    for (const socket of sockets) {
      const at = place.parse(socket.deserializeAttachment());
      if (at.after >= last || socket.readyState !== WebSocket.OPEN) continue;
      const key = `${at.after}\t${at.conversation}`;
      let news = told.get(key);
      if (!news) {
        news = { messages: [], after: at.after };
        for (let more = true; more; ) {
          const page = feedAfter(sql, route, at.conversation, news.after);
          news.messages.push(...page.events.map((event) => JSON.stringify(event)));
          news.after = page.last;
          more = page.more;
        }
        // Rows of other conversations up to `last` are none of this follower's: the next look starts past them.
        news.after = Math.max(news.after, last);
        told.set(key, news);
      }
      for (const message of news.messages) socket.send(message);
      socket.serializeAttachment({ conversation: at.conversation, after: news.after });
    }
  }

  /** Ends the follows of one conversation (or all): they have nothing more to follow. */
  end(why: string, conversation?: string): void {
    for (const socket of this.ctx.getWebSockets(conversation)) socket.close(FOLLOW_GONE, why);
  }
}

type Handler = (this: { followers: Followers }, ...args: unknown[]) => unknown;

/**
 * Wraps every handler on a Durable Object class's prototype (the methods RPC,
 * fetch and the alarm call) so each call ends by telling the instance's
 * followers what it wrote, whether it answered or threw.
 */
export function tellFollowersAfterEachCall(proto: { followers: Followers }): void {
  const methods = proto as unknown as Record<string, Handler>;
  for (const name of Object.getOwnPropertyNames(proto)) {
    const original = methods[name];
    if (name === "constructor" || typeof original !== "function") continue;
    const wrapped = async function (this: { followers: Followers }, ...args: unknown[]): Promise<unknown> {
      try {
        return await original.apply(this, args);
      } finally {
        try {
          this.followers.tell();
        } catch (err) {
          console.error("followers could not be told what was written", err);
        }
      }
    };
    Object.defineProperty(proto, name, { value: wrapped, writable: true, configurable: true });
  }
}

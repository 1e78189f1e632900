// The Worker's side of following a conversation: a Server-Sent Events
// response, fed through a WebSocket to the agent's object, which sends each
// event as it is written (runtime/feed/followers.ts). Nothing is asked while
// nothing happens, so an object whose followers wait sleeps; a socket cut
// under the follow (a deploy restarts the object) is opened again from the
// last event heard, so the follower misses nothing. A model call's text as it
// is written comes from the courier reading the provider's stream, not from
// the object (listenToText).
import * as z from "zod";
import type { Route } from "../chat.ts";
import { courierStub, partialText, type PartialText } from "../courier/index.ts";
import { modelLane } from "../effects/index.ts";
import { type FeedEvent, FOLLOW_GONE, followRequest } from "../feed/index.ts";
import { agentStub } from "../object/index.ts";

/** A comment line this often keeps proxies from closing a quiet stream, and finds a client that has gone. */
const KEEP_ALIVE_MS = 15_000;

/** Where a Server-Sent Events stream is written; `gone` settles once the client has gone. */
export interface EventSink {
  send(event: { id?: number; event: string; data: unknown }): Promise<void>;
  readonly gone: Promise<void>;
}

/** A Server-Sent Events response written by `write`, with a keep-alive comment while it is quiet. */
export function sseResponse(write: (sink: EventSink) => Promise<void>): Response {
  const { readable, writable } = new TransformStream<Uint8Array, Uint8Array>();
  const writer = writable.getWriter();
  const encoder = new TextEncoder();
  let leave = () => {};
  const gone = new Promise<void>((resolve) => (leave = resolve));
  // A write fails once the client has gone: the writer stops, and whatever waits on `gone` wakes.
  const put = (text: string) => writer.write(encoder.encode(text)).catch(() => leave());
  const keepAlive = setInterval(() => void put(": keep-alive\n\n"), KEEP_ALIVE_MS);
  const sink: EventSink = {
    // JSON on one line: a data field holds no newline.
    send: ({ id, event, data }) => put(`${id === undefined ? "" : `id: ${id}\n`}event: ${event}\ndata: ${JSON.stringify(data)}\n\n`),
    gone,
  };
  void write(sink)
    .catch((err) => console.error("event stream failed", err))
    .finally(() => {
      clearInterval(keepAlive);
      void writer.close().catch(() => undefined);
    });
  return new Response(readable, { headers: { "content-type": "text/event-stream", "cache-control": "no-cache" } });
}

/** An event as the object sends it: checked for what the follow relies on, its id. */
const feedMessage = z.object({ id: z.number().int().positive(), type: z.string() }).passthrough();

export interface FeedFollow {
  /** The events written since the last call, oldest first, waiting for some until `until`; null once the follow has ended (deadline, client gone, or nothing more to follow). */
  next(until: number): Promise<FeedEvent[] | null>;
  close(): void;
}

/** Follows the conversation from event id `after` until closed or `stop` (the client gone) settles. */
export async function followFeed(env: Env, route: Route, conversation: string, after: number, stop?: Promise<void>): Promise<FeedFollow> {
  let heard: FeedEvent[] = [];
  let ended = false;
  let socket: WebSocket | null = null;
  let wake = () => {};
  const open = async () => {
    const res = await agentStub(env, route).fetch(followRequest(route, conversation, after));
    if (!res.webSocket) throw new Error(`the agent's object refused the follow: ${res.status} ${await res.text()}`);
    const opened = res.webSocket;
    opened.accept();
    opened.addEventListener("message", (message) => {
      const event = feedMessage.parse(JSON.parse(String(message.data))) as unknown as FeedEvent;
      // A socket opened again may repeat what the last one sent after `after` was read.
      if (event.id <= after) return;
      after = event.id;
      heard.push(event);
      wake();
    });
    opened.addEventListener("close", (closing) => {
      if (socket !== opened) return;
      socket = null;
      if (closing.code === FOLLOW_GONE) ended = true;
      wake();
    });
    socket = opened;
  };
  const close = () => {
    ended = true;
    const was = socket;
    socket = null;
    was?.close(1000, "the follower has gone");
    wake();
  };
  void stop?.then(close);
  await open();
  return {
    async next(until) {
      while (heard.length === 0 && !ended) {
        if (Date.now() >= until) return null;
        // Cut under the follow (not ended by the object): opened again from the last event heard.
        if (!socket) await open();
        let timer: ReturnType<typeof setTimeout> | undefined;
        await new Promise<void>((resolve) => {
          wake = resolve;
          timer = setTimeout(resolve, until - Date.now());
        });
        clearTimeout(timer);
      }
      if (heard.length === 0) return null;
      const events = heard;
      heard = [];
      return events;
    },
    close,
  };
}

/**
 * Hears the text the conversation's model calls write, from the courier of
 * their lane, until stopped; each piece is handled before the next is read,
 * so a slow stream gets fewer, larger pieces. A courier that cannot be heard
 * leaves the text to the feed (whole messages).
 */
export function listenToText(env: Env, route: Route, conversation: string, heard: (piece: PartialText) => Promise<void>): { stop(): void } {
  const lane = modelLane(conversation);
  let stopped = false;
  let reader: ReadableStreamDefaultReader<Uint8Array> | undefined;
  const cancel = () => void reader?.cancel().catch(() => undefined);
  void (async () => {
    reader = (await courierStub(env, { ...route, lane }).listen(lane)).getReader();
    if (stopped) return cancel();
    const decoder = new TextDecoder();
    let buffer = "";
    for (;;) {
      const { done, value } = await reader.read();
      if (done || stopped) return;
      buffer += decoder.decode(value, { stream: true });
      for (let end = buffer.indexOf("\n"); end >= 0; end = buffer.indexOf("\n")) {
        const line = buffer.slice(0, end);
        buffer = buffer.slice(end + 1);
        await heard(partialText.parse(JSON.parse(line)));
      }
    }
  })().catch((err: unknown) => {
    if (!stopped) console.warn(`a follow hears no text as it is written: ${err instanceof Error ? err.message : String(err)}`);
  });
  return {
    stop: () => {
      stopped = true;
      cancel();
    },
  };
}

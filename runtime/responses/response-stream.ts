// A response's Responses API event stream: created, each output item as the
// turn makes it, and its end. The items come from the agent's feed, read
// again each time its object says something was written (follow.ts); a
// message's text comes as the model writes it, from the
// courier that reads the provider's stream (runtime/courier/partial-texts.ts),
// so a reply streams in pieces with no call into the agent's object per piece
// (one feed read when a call's text begins). The feed stays the authority:
// the finished message closes its streamed item with the whole text (sending
// what the pieces missed), and a message whose pieces never came is sent whole.
import type { Route } from "../chat.ts";
import type { PartialText } from "../courier/index.ts";
import type { ResponseState } from "../feed/index.ts";
import {
  endEvent,
  itemEvents,
  MESSAGE_SEPARATOR,
  messageClosing,
  messageId,
  messageItem,
  messageOpening,
  messageText,
  type OutputItem,
  outputItems,
  responseObject,
  type StreamEvent,
  textDeltas,
} from "./openai.ts";
import { type EventSink, followFeed, listenToText, sseResponse } from "./follow.ts";

/**
 * The stream of a response: `read` asks the agent's object for it as it
 * stands. A stream asked for again (GET /v1/responses/{id}?stream=true) is
 * made from the start, numbered the same, and sends the events after
 * `startingAfter` (the last sequence number its client had).
 */
export function streamResponse(env: Env, route: Route, first: ResponseState, read: () => Promise<ResponseState>, streamMs: number, startingAfter = -1): Response {
  return sseResponse(async (sink) => {
    const events = new ResponseEvents(sink, first, startingAfter);
    await events.start();
    // The feed's looks and the text's pieces take turns: each sends its events whole.
    let turn: Promise<unknown> = Promise.resolve();
    const exclusive = <T>(work: () => Promise<T>): Promise<T> => {
      const run = turn.then(work);
      turn = run.catch(() => undefined);
      return run;
    };
    const refresh = async () => {
      events.state = await read();
      await events.flush();
    };
    const listening = listenToText(env, route, first.conversation, (piece) => exclusive(() => events.piece(piece, refresh)));
    const feed = await followFeed(env, route, first.conversation, first.seen, sink.gone);
    let ended = false;
    try {
      const until = Date.now() + streamMs;
      const look = () => exclusive(async () => (await events.flush(), events.state.status !== "in_progress"));
      ended = await look();
      while (!ended && (await feed.next(until))) ended = await exclusive(async () => (await refresh(), events.state.status !== "in_progress"));
    } finally {
      listening.stop();
      feed.close();
    }
    if (ended) await exclusive(() => events.end());
  });
}

/** The response once its turn has ended, or as it stands after `waitMs`: read again each time its conversation's feed is written. */
export async function settledResponse(env: Env, route: Route, state: ResponseState, read: () => Promise<ResponseState>, waitMs: number): Promise<ResponseState> {
  if (state.status !== "in_progress") return state;
  const feed = await followFeed(env, route, state.conversation, state.seen);
  try {
    const until = Date.now() + waitMs;
    while (state.status === "in_progress" && (await feed.next(until))) state = await read();
  } finally {
    feed.close();
  }
  return state;
}

/** What a stream has sent: its events are numbered, its output items indexed in the order sent. */
class ResponseEvents {
  private sequence = 0;
  /** The next item's output_index. */
  private index = 0;
  /** How many of the response's output items (outputItems) have been sent. */
  private sent = 0;
  /**
   * The message whose text is coming in pieces: its call, its output_index,
   * its text heard so far, how much of the call's text that is, and how much
   * of it its deltas have carried (textDeltas cuts them from the text alone).
   */
  private open: { calledAt: number; index: number; id: string; text: string; heard: number; sent: number } | null = null;
  /** The calls whose message has been sent: a late piece of one opens nothing. */
  private readonly finished = new Set<number>();
  /** A message has been sent or opened: the next starts with the separator (outputItems). */
  private said = false;

  constructor(
    private readonly sink: EventSink,
    public state: ResponseState,
    /** The sequence number a resumed stream starts after: the events up to it are made again, numbered the same, and not sent. */
    private readonly startingAfter = -1,
  ) {}

  private async send(event: StreamEvent): Promise<void> {
    const sequence_number = this.sequence++;
    if (sequence_number > this.startingAfter) await this.sink.send({ event: event.type, data: { ...event, sequence_number } });
  }

  private async sendAll(events: StreamEvent[]): Promise<void> {
    for (const event of events) await this.send(event);
  }

  async start(): Promise<void> {
    const opening = responseObject({ ...this.state, status: "in_progress", events: [] }, []);
    await this.send({ type: "response.created", response: opening });
    await this.send({ type: "response.in_progress", response: opening });
  }

  /** Sends the state's output items not sent yet; a message whose text came in pieces closes its item. Answers whether there were any. */
  async flush(): Promise<boolean> {
    const items = outputItems(this.state.events).slice(this.sent);
    this.sent += items.length;
    for (const { item, calledAt } of items) {
      if (calledAt !== undefined) {
        this.finished.add(calledAt);
        this.said = true;
      }
      if (this.open && calledAt === this.open.calledAt) await this.close(item);
      else await this.sendAll(itemEvents(this.index++, item));
    }
    return items.length > 0;
  }

  /**
   * A piece of a call's text. A call's first piece opens its message, after a
   * read of the feed (`refresh`): a lane makes one call at a time, so what the
   * turn did before the call began (the message of the call before it too) is
   * in the feed by then, and is sent first; a call before it still open wrote
   * no message (it is made again) and ends incomplete. A piece of a call whose
   * message has been sent is left to the feed.
   */
  async piece(piece: PartialText, refresh: () => Promise<void>): Promise<void> {
    if (this.finished.has(piece.calledAt)) return;
    if (this.open?.calledAt === piece.calledAt) {
      if (piece.at !== this.open.heard || piece.delta === "") return;
      this.open.text += piece.delta;
      this.open.heard += piece.delta.length;
      return this.deltas(this.open.text, false);
    }
    if (piece.at !== 0) return;
    await refresh();
    await this.abandon();
    if (this.finished.has(piece.calledAt) || this.state.status !== "in_progress") return;
    const text = `${this.said ? MESSAGE_SEPARATOR : ""}${piece.delta}`;
    this.said = true;
    this.open = { calledAt: piece.calledAt, index: this.index++, id: messageId(piece.calledAt), text, heard: piece.delta.length, sent: 0 };
    await this.sendAll(messageOpening(this.open.index, messageItem(this.open.id, "")));
    await this.deltas(text, false);
  }

  /** The open message's deltas of `text` not sent yet: those cut so far, or (`whole`) all. */
  private async deltas(text: string, whole: boolean): Promise<void> {
    const open = this.open!;
    const { events, to } = textDeltas(open.index, open.id, text, open.sent, whole);
    open.sent = to;
    await this.sendAll(events);
  }

  /** The streamed message's call has ended: the rest of its text (if what was sent is its start), and its item closed. */
  private async close(item: OutputItem["item"]): Promise<void> {
    const text = messageText(item);
    if (text.startsWith(this.open!.text.slice(0, this.open!.sent))) await this.deltas(text, true);
    const { index } = this.open!;
    this.open = null;
    await this.sendAll(messageClosing(index, item));
  }

  /** A message still open whose call ended with no message: its item ends incomplete, with what was streamed. */
  private async abandon(): Promise<void> {
    if (!this.open) return;
    const { index, id, text } = this.open;
    await this.deltas(text, true);
    this.open = null;
    await this.sendAll(messageClosing(index, { ...messageItem(id, text), status: "incomplete" }));
  }

  /** The turn has ended: a message still open ends incomplete, then the response's end. */
  async end(): Promise<void> {
    await this.abandon();
    await this.send(endEvent(this.state, outputItems(this.state.events)));
  }
}

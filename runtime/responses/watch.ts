// The Worker's side of following a turn: it asks the agent's object again
// until there is something new (the object never holds a request open), soon
// after a change and less often while nothing happens.
import { sleep } from "../../lib/timeout.ts";

/** The first wait after a change, doubled while nothing changes, up to the longest. */
const FIRST_WAIT_MS = 25;
const LONGEST_WAIT_MS = 500;
/** A comment line this often keeps proxies from closing a quiet stream. */
const KEEP_ALIVE_MS = 15_000;

/**
 * Calls `look` until it answers true (done) or `deadlineMs` has passed; `look`
 * answers whether it saw something new through `changed`. Resolves with
 * whether it ended done.
 */
export async function watch(deadlineMs: number, look: (changed: () => void) => Promise<boolean>, stopped: () => boolean = () => false): Promise<boolean> {
  const deadline = Date.now() + deadlineMs;
  let wait = FIRST_WAIT_MS;
  while (!stopped()) {
    let changed = false;
    if (await look(() => (changed = true))) return true;
    if (Date.now() >= deadline) return false;
    wait = changed ? FIRST_WAIT_MS : Math.min(wait * 2, LONGEST_WAIT_MS);
    await sleep(Math.min(wait, deadline - Date.now()));
  }
  return false;
}

/** Where a Server-Sent Events stream is written; `closed` once the client has gone. */
export interface EventSink {
  send(event: { id?: number; event: string; data: unknown }): Promise<void>;
  readonly closed: boolean;
}

/** A Server-Sent Events response written by `write`, with a keep-alive comment while it is quiet. */
export function sseResponse(write: (sink: EventSink) => Promise<void>): Response {
  const { readable, writable } = new TransformStream<Uint8Array, Uint8Array>();
  const writer = writable.getWriter();
  const encoder = new TextEncoder();
  let closed = false;
  // A write fails once the client has gone: the writer stops at its next look.
  const put = (text: string) => writer.write(encoder.encode(text)).catch(() => void (closed = true));
  const keepAlive = setInterval(() => void put(": keep-alive\n\n"), KEEP_ALIVE_MS);
  const sink: EventSink = {
    // JSON on one line: a data field holds no newline.
    send: ({ id, event, data }) => put(`${id === undefined ? "" : `id: ${id}\n`}event: ${event}\ndata: ${JSON.stringify(data)}\n\n`),
    get closed() {
      return closed;
    },
  };
  void write(sink)
    .catch((err) => console.error("event stream failed", err))
    .finally(() => {
      clearInterval(keepAlive);
      void writer.close().catch(() => undefined);
    });
  return new Response(readable, { headers: { "content-type": "text/event-stream", "cache-control": "no-cache" } });
}

// The Worker's side of following a turn: it asks the agent's object again
// until there is something new (the object never holds a request open), soon
// after a change and less often while nothing happens.
import { streamSSE, type SSEStreamingApi } from "hono/streaming";
import type { Context } from "hono";

/** The first wait after a change, doubled while nothing changes, up to the longest. */
const FIRST_WAIT_MS = 25;
const LONGEST_WAIT_MS = 500;
/** A comment line this often keeps proxies from closing a quiet stream. */
const KEEP_ALIVE_MS = 15_000;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

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

/** A Server-Sent Events response written by `write`, with a keep-alive comment while it is quiet. */
export function sseResponse(c: Context, write: (stream: SSEStreamingApi) => Promise<void>): Response {
  return streamSSE(c, async (stream) => {
    const keepAlive = setInterval(() => void stream.write(": keep-alive\n\n").catch(() => undefined), KEEP_ALIVE_MS);
    try {
      await write(stream);
    } finally {
      clearInterval(keepAlive);
    }
  });
}

// Reading a follow of a conversation (GET …/events, Server-Sent Events) the
// way a client does, for the node tests that follow one against wrangler dev.
import assert from "node:assert/strict";

/**
 * A follow with the bearer `token`: it reads a follow stream's events into
 * `into` (its text_delta events, which have no id, into `deltas`) until
 * `enough(into)` or the stream breaks (a kill), and resolves with how it ended.
 */
export const follower = (token) => async (url, lastEventId, into, enough, deltas = []) => {
  const controller = new AbortController();
  const res = await fetch(url, { headers: { authorization: `Bearer ${token}`, ...(lastEventId ? { "last-event-id": lastEventId } : {}) }, signal: controller.signal });
  assert.equal(res.status, 200);
  assert.match(res.headers.get("content-type"), /text\/event-stream/);
  const decoder = new TextDecoder();
  let buffer = "";
  try {
    for await (const chunk of res.body) {
      buffer += decoder.decode(chunk, { stream: true });
      let end;
      while ((end = buffer.indexOf("\n\n")) >= 0) {
        const block = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        const field = (name) => block.split("\n").find((line) => line.startsWith(`${name}: `))?.slice(name.length + 2);
        if (field("event") === "text_delta") deltas.push({ ...JSON.parse(field("data")), heardAt: Date.now() });
        if (field("id") === undefined) continue; // a keep-alive comment, a text_delta
        into.push({ id: Number(field("id")), type: field("event"), data: JSON.parse(field("data")) });
        if (enough(into)) {
          controller.abort();
          return "enough";
        }
      }
    }
    return "ended";
  } catch (err) {
    if (controller.signal.aborted) return "enough";
    return "broken";
  }
};

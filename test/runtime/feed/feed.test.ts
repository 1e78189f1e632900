// A conversation's feed (runtime/feed): one event per log row, in order, with
// ids that only grow; archived with its conversation by retention and put back
// first, so a restored conversation reports nothing twice and keeps its ids.
// Its followers are told each event as it is written, through a socket the
// object keeps (runtime/feed/followers.ts): across the object's eviction too.
import { runInDurableObject } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import type { FeedEvent } from "../../../runtime/feed/index.ts";
import { agent, evict, rows } from "../../agents.ts";
import { postMessage, script, settled, unique, waitFor, worker } from "../../support.ts";

const DAY_MS = 86_400_000;

async function feedOf(tenant: string, name: string, conversation: string, after = 0): Promise<FeedEvent[]> {
  const page = await agent(tenant, name).feed({ tenant, agent: name }, conversation, after);
  return page?.events ?? [];
}

const shape = (events: FeedEvent[]) => events.map((e) => [e.id, e.type, "entry" in e ? e.entry.role : "turn" in e ? e.turn : null]);

describe("the feed", () => {
  it("orders a turn's events with growing ids, reads on from any id, and survives its conversation's archive and restore without repeating an event", async () => {
    const tenant = unique("feed");
    const name = "helper";
    const s = unique("feed");
    await script(s, [{ text: "First answer." }, { text: "Second answer." }]);
    await postMessage(tenant, name, { text: `[s:${s}] hello`, conversation: s });
    await settled(tenant, name, s);

    const first = await feedOf(tenant, name, s);
    expect(first.map((e) => e.type)).toEqual(["status", "message", "message", "done"]);
    const ids = first.map((e) => e.id);
    expect(ids).toEqual([...ids].sort((a, b) => a - b));
    expect(new Set(ids).size).toBe(ids.length);
    expect(shape(await feedOf(tenant, name, s, ids[1]))).toEqual(shape(first.slice(2)));

    // Archived: its feed rows leave the object with it, and a read still shows them.
    await runInDurableObject(agent(tenant, name), (_i, state) => state.storage.sql.exec("UPDATE conversations SET updated_at = ? WHERE id = ?", Date.now() - 100 * DAY_MS, s));
    await evict(tenant, name);
    await runInDurableObject(agent(tenant, name), (_i, state) => state.storage.setAlarm(Date.now()));
    await waitFor("the conversation to be archived", async () => (await rows(tenant, name, "SELECT 1 FROM conversations WHERE id = ? AND archived_at IS NOT NULL", s)).length === 1);
    expect(await rows(tenant, name, "SELECT * FROM feed WHERE conversation = ?", s)).toEqual([]);
    expect(shape(await feedOf(tenant, name, s))).toEqual(shape(first));

    // A message restores it: the old events keep their ids, the new turn's come after, none twice.
    await postMessage(tenant, name, { text: "and again", conversation: s });
    await settled(tenant, name, s);
    const whole = await feedOf(tenant, name, s);
    expect(shape(whole.slice(0, first.length))).toEqual(shape(first));
    expect(whole.slice(first.length).map((e) => e.type)).toEqual(["status", "message", "message", "done"]);
    expect(whole.at(-2)).toMatchObject({ type: "message", entry: { role: "assistant", text: "Second answer." } });
    expect(whole.at(-1)!.id).toBeGreaterThan(ids.at(-1)!);
    expect(new Set(whole.map((e) => e.id)).size).toBe(whole.length);
  });

  it("tells a follower each event once as it is written, goes on when the object is evicted under the follow, and ends the follow when the conversation is deleted", async () => {
    const tenant = unique("follow");
    const name = "helper";
    const s = unique("follow");
    await script(s, [{ text: "First answer." }, { text: "Second answer." }, { text: "Third answer." }]);
    await postMessage(tenant, name, { text: `[s:${s}] hello`, conversation: s });
    await settled(tenant, name, s);
    const res = await worker(`/v1/tenants/${tenant}/agents/${name}/conversations/${s}/events`, { headers: { authorization: "Bearer test-admin-token" } });
    expect(res.status).toBe(200);
    // The stream's events as they come; `ended` once the Worker closes it.
    const heard: { id: number; type: string }[] = [];
    let ended = false;
    void (async () => {
      const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
      let buffer = "";
      for (let read = await reader.read(); !read.done; read = await reader.read()) {
        buffer += read.value;
        for (let end = buffer.indexOf("\n\n"); end >= 0; end = buffer.indexOf("\n\n")) {
          const block = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          const id = /^id: (\d+)$/m.exec(block)?.[1];
          if (id) heard.push({ id: Number(id), type: /^event: (\w+)$/m.exec(block)![1]! });
        }
      }
      ended = true;
    })();
    const done = (n: number) => heard.filter((e) => e.type === "done").length === n;
    await waitFor("the first turn's events", async () => done(1));

    // The object is evicted under the follow (as a deploy restarts it): the Worker opens its socket again and hears the next turn.
    await evict(tenant, name);
    await postMessage(tenant, name, { text: "and again", conversation: s });
    await waitFor("the second turn's events", async () => done(2));
    await evict(tenant, name);
    await postMessage(tenant, name, { text: "once more", conversation: s });
    await waitFor("the third turn's events", async () => done(3));
    expect(shape(await feedOf(tenant, name, s)).map(([id, type]) => ({ id, type }))).toEqual(heard);

    // Deleted: nothing more to follow, and the stream ends.
    const deleted = await worker(`/v1/tenants/${tenant}/agents/${name}/conversations/${s}`, { method: "DELETE", headers: { authorization: "Bearer test-admin-token" } });
    expect(deleted.status).toBe(204);
    await waitFor("the follow to end", async () => ended);
  });
});

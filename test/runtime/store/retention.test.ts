// Retention (runtime/store/archive.ts, issue 24): settled conversations past
// RETENTION_DAYS leave the object for R2 in bounded slices and the object's
// SQLite shrinks; the console and the API still read them; a message to one
// restores it and the model sees its history; a message during retention is
// answered; old inbound ids and settled sends leave, a recent retry is still
// one event; an idle object keeps no alarm.
import { runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it, vi } from "vitest";
import { ARCHIVE_SLICE, archiveKey, type ConversationArchive, DEDUPE_WINDOW_MS } from "../../../runtime/store/index.ts";
import { agent, alarmOf, evict, rows } from "../../agents.ts";
import { captureConsole } from "../../leaks.ts";
import { consoleCookie, getConversation, postMessage, providerRequests, releaseProvider, script, settled, unique, waitFor, withVars, worker } from "../../support.ts";

const DAY_MS = 86_400_000;

/** A settled conversation, the template of the old ones. */
async function liveConversation(tenant: string, name: string): Promise<string> {
  const live = unique("live");
  await script(live, [{ text: "The answer is 42." }]);
  await postMessage(tenant, name, { text: `[s:${live}] what is the answer?`, conversation: live });
  await settled(tenant, name, live);
  return live;
}

/**
 * `count` copies of `live` (its log, sends and busy time, its id replaced in
 * the text), last touched `ageDays` ago; the object's SQLite size after.
 */
function insertOld(tenant: string, name: string, live: string, ids: string[], ageDays: number): Promise<number> {
  return runInDurableObject(agent(tenant, name), (_instance, state) => {
    const sql = state.storage.sql;
    const at = Date.now() - ageDays * DAY_MS;
    state.storage.transactionSync(() => {
      for (const id of ids) {
        sql.exec(
          `INSERT INTO conversations (id, status, turn, reply_to, started_by, input_tokens, output_tokens, cost, created_at, updated_at)
           SELECT ?, status, turn, reply_to, started_by, input_tokens, output_tokens, cost, ?, ? FROM conversations WHERE id = ?`,
          id,
          at,
          at,
          live,
        );
        sql.exec("INSERT INTO log (conversation, turn, type, data, at) SELECT ?, turn, type, replace(data, ?, ?), ? FROM log WHERE conversation = ? ORDER BY seq", id, live, id, at, live);
        sql.exec(
          `INSERT INTO outbox (conversation, address, message, ref_key, status, attempts, ref, created_at, sent_at)
           SELECT ?, address, message, ref_key, status, attempts, ref, ?, ? FROM outbox WHERE conversation = ? ORDER BY id`,
          id,
          at,
          at,
          live,
        );
        sql.exec("INSERT INTO busy_turns (conversation, turn, busy_ms, handlers, at) SELECT ?, turn, busy_ms, handlers, ? FROM busy_turns WHERE conversation = ?", id, at, live);
      }
    });
    return sql.databaseSize;
  });
}

/** A new tenant's agent `name` with a settled conversation and one copy of it past the window. */
async function withOneOld(name: string): Promise<{ tenant: string; old: string }> {
  const tenant = unique("ret");
  const live = await liveConversation(tenant, name);
  const old = `${live}old`;
  await insertOld(tenant, name, live, [old], 100);
  return { tenant, old };
}

/** Starts a pass on a fresh instance (as the next wake after an eviction would) and waits until none of `ids` is left unarchived. */
async function retire(tenant: string, name: string, ids: string[], timeoutMs: number): Promise<number> {
  await evict(tenant, name);
  const started = Date.now();
  await runInDurableObject(agent(tenant, name), (_instance, state) => state.storage.setAlarm(Date.now()));
  await waitFor(
    "retention to archive every old conversation",
    async () => (await unarchived(tenant, name, ids)) === 0,
    timeoutMs,
  );
  return Date.now() - started;
}

async function unarchived(tenant: string, name: string, ids: string[]): Promise<number> {
  const [row] = await rows<{ n: number }>(tenant, name, `SELECT COUNT(*) AS n FROM conversations WHERE archived_at IS NULL AND id IN (SELECT value FROM json_each(?))`, JSON.stringify(ids));
  return row!.n;
}

async function archiveOf(tenant: string, name: string, id: string): Promise<ConversationArchive | null> {
  const object = await env.LARGE_VALUES.get(archiveKey({ tenant, agent: name }, id));
  if (!object) return null;
  return JSON.parse(await new Response(object.body.pipeThrough(new DecompressionStream("gzip"))).text()) as ConversationArchive;
}

async function archivedCount(tenant: string, name: string): Promise<number> {
  let count = 0;
  let cursor: string | undefined;
  do {
    const page = await env.LARGE_VALUES.list({ prefix: `archive/${tenant}/${name}/`, cursor });
    count += page.objects.length;
    cursor = page.truncated ? page.cursor : undefined;
  } while (cursor);
  return count;
}

describe("retention", () => {
  it("10,000 settled conversations past the window: archived to R2 in slices, the object shrinks, the console and API read them, a message continues one with its history", async () => {
    const tenant = unique("ret");
    const name = "keeper";
    const live = await liveConversation(tenant, name);
    const ids = Array.from({ length: 10_000 }, (_, i) => `${live}o${i}`);
    const sizeBefore = await insertOld(tenant, name, live, ids, 100);
    const ms = await retire(tenant, name, ids, 240_000);

    const sizeAfter = await runInDurableObject(agent(tenant, name), (_instance, state) => state.storage.sql.databaseSize);
    console.log(`retention: ${ids.length} conversations in ${ms} ms (${Math.ceil(ids.length / ARCHIVE_SLICE)} slices of ${ARCHIVE_SLICE}); SQLite ${sizeBefore} → ${sizeAfter} bytes`);
    expect(sizeAfter).toBeLessThan(sizeBefore / 2);
    // Their rows are gone, the live one's are not; nothing stays armed.
    expect(await rows(tenant, name, "SELECT 1 FROM log WHERE conversation IN (SELECT id FROM conversations WHERE archived_at IS NOT NULL) LIMIT 1")).toEqual([]);
    expect((await rows(tenant, name, "SELECT 1 FROM log WHERE conversation = ?", live)).length).toBeGreaterThan(0);
    expect(await alarmOf(tenant, name)).toBeNull();

    // One gzip JSON per conversation, holding its log.
    expect(await archivedCount(tenant, name)).toBe(ids.length);
    const picked = ids[4_321]!;
    const archive = await archiveOf(tenant, name, picked);
    expect(archive!.rows.log.some((row) => String(row.data).includes(`[s:${picked}] what is the answer?`))).toBe(true);

    // The API and the console read an archived conversation.
    const view = await getConversation(tenant, name, picked);
    expect(view.transcript.map((e) => [e.role, e.text])).toEqual([
      ["user", `[s:${picked}] what is the answer?`],
      ["assistant", "The answer is 42."],
    ]);
    const page = await worker(`/console/tenants/${tenant}/agents/${name}/conversations/${picked}`, { headers: { cookie: await consoleCookie() } });
    expect(page.status).toBe(200);
    const html = await page.text();
    expect(html).toContain(`[s:${picked}] what is the answer?`);
    expect(html).toContain("The answer is 42.");
    // Reading wrote nothing back.
    expect(await unarchived(tenant, name, [picked])).toBe(0);

    // A message restores it first: the model is asked with its history.
    await script(picked, [{ text: "Still 42." }]);
    const res = await postMessage(tenant, name, { text: "and now?", conversation: picked });
    expect(res.status).toBe(202);
    const after = await settled(tenant, name, picked);
    expect(after.transcript.map((e) => e.text)).toEqual([`[s:${picked}] what is the answer?`, "The answer is 42.", "and now?", "Still 42."]);
    const [request] = await providerRequests(picked);
    const said = JSON.stringify(request!.body.messages);
    expect(said).toContain("what is the answer?");
    expect(said).toContain("The answer is 42.");
    await waitFor("the restored conversation's archive to leave R2", async () => (await archiveOf(tenant, name, picked)) === null);
  }, 300_000);

  it("a message during a backlog is accepted and answered; no slice runs while its turn runs; the backlog finishes after", async () => {
    const tenant = unique("ret");
    const name = "busy";
    const idleStart = Date.now();
    const live = await liveConversation(tenant, name);
    const idleToModel = (await providerRequests(live))[0]!.at - idleStart;
    const ids = Array.from({ length: 3_000 }, (_, i) => `${live}o${i}`);
    await insertOld(tenant, name, live, ids, 100);
    await evict(tenant, name);
    await runInDurableObject(agent(tenant, name), (_instance, state) => state.storage.setAlarm(Date.now()));
    await waitFor("retention to begin", async () => (await unarchived(tenant, name, ids)) < ids.length, 30_000);

    // The model holds its answer: the turn runs (waits on the model) until released.
    const s = unique("during");
    await script(s, [{ text: "Answered during retention.", hold: true }]);
    const sent = Date.now();
    const res = await postMessage(tenant, name, { text: `[s:${s}] hello`, conversation: s });
    expect(res.status).toBe(202);
    expect(await res.json()).toMatchObject({ accepted: true });
    const [request] = await waitFor("the model to be asked", async () => {
      const requests = await providerRequests(s);
      return requests.length > 0 ? requests : undefined;
    });
    const left = await unarchived(tenant, name, ids);
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    expect(await unarchived(tenant, name, ids), "no slice while a turn runs").toBe(left);
    expect(left).toBeGreaterThan(0);
    console.log(`retention: a message during a backlog reached the model ${request!.at - sent} ms after it was sent (on the idle object: ${idleToModel} ms); ${left} conversations waited meanwhile`);

    await releaseProvider(s);
    const view = await settled(tenant, name, s, 30_000);
    expect(view.transcript.at(-1)!.text).toBe("Answered during retention.");
    await waitFor("the backlog to finish", async () => (await unarchived(tenant, name, ids)) === 0, 120_000);
    expect((await rows(tenant, name, "SELECT archived_at FROM conversations WHERE id = ?", s))[0]!.archived_at).toBeNull();
    await waitFor("no alarm once idle", async () => (await alarmOf(tenant, name)) === null);
  }, 200_000);

  it("a conversation inside the window, or with something open, stays", async () => {
    const tenant = unique("ret");
    const name = "young";
    const live = await liveConversation(tenant, name);
    const young = `${live}young`;
    const open = `${live}open`;
    await insertOld(tenant, name, live, [young], 80);
    await insertOld(tenant, name, live, [open], 100);
    // A note waiting for its next turn keeps it.
    await rows(tenant, name, `INSERT INTO inbox (conversation, type, data, at) VALUES (?, 'marker', '{"text":"later"}', 0)`, open);
    const old = `${live}old`;
    await insertOld(tenant, name, live, [old], 100);
    await retire(tenant, name, [old], 30_000);
    expect(await unarchived(tenant, name, [young, open, live])).toBe(3);
    // The backlog is done: retention keeps nothing armed (invariant 3).
    await waitFor("no alarm once idle", async () => (await alarmOf(tenant, name)) === null);
  });

  it("a RETENTION_DAYS that is not a positive number archives nothing, is logged by its name, and stops no turn", async () => {
    const name = "misconfigured";
    const { tenant, old } = await withOneOld(name);
    const lines = captureConsole();
    try {
      await withVars({ RETENTION_DAYS: "-3" }, async () => {
        await evict(tenant, name);
        const s = unique("still");
        await script(s, [{ text: "Still answering." }]);
        expect((await postMessage(tenant, name, { text: `[s:${s}] hi`, conversation: s })).status).toBe(202);
        expect((await settled(tenant, name, s)).transcript.at(-1)!.text).toBe("Still answering.");
        await waitFor("the slice's failure to be logged", async () => lines.some((line) => line.includes("RETENTION_DAYS is invalid")));
      });
    } finally {
      vi.restoreAllMocks();
    }
    expect(await unarchived(tenant, name, [old])).toBe(1);
  });

  it("a message to an archived conversation whose R2 object is gone is still accepted and answered", async () => {
    const name = "lost";
    const { tenant, old } = await withOneOld(name);
    await retire(tenant, name, [old], 30_000);
    await env.LARGE_VALUES.delete(archiveKey({ tenant, agent: name }, old));
    await script(old, [{ text: "Starting afresh." }]);
    const res = await postMessage(tenant, name, { text: `[s:${old}] hello again`, conversation: old });
    expect(res.status).toBe(202);
    expect((await settled(tenant, name, old)).transcript.map((e) => e.text)).toEqual([`[s:${old}] hello again`, "Starting afresh."]);
  });

  it("inbound ids, settled sends, ended turns' tool calls and settled jobs past their window leave; a retry inside the window is still one event", async () => {
    const tenant = unique("ret");
    const name = "dedupe";
    const live = await liveConversation(tenant, name);
    await script(live, [{ text: "Again 42." }]);
    await postMessage(tenant, name, { text: "again", conversation: live }, { "idempotency-key": "recent" });
    await settled(tenant, name, live);
    const past = Date.now() - DEDUPE_WINDOW_MS - DAY_MS;
    await rows(tenant, name, "INSERT INTO inbound (event_id, conversation, kind, at) VALUES ('api:ancient', ?, 'message', ?)", live, past);
    const send = "INSERT INTO outbox (conversation, address, message, status, created_at, sent_at) VALUES (?, '{}', '{}', 'sent', ?, ?) RETURNING id";
    const [oldSend] = await rows<{ id: number }>(tenant, name, send, live, past, past);
    const [recentSend] = await rows<{ id: number }>(tenant, name, send, live, Date.now(), Date.now());
    // Tool calls: an ended turn's old one leaves; a recent one, and an old one of a turn still running, stay.
    const call = "INSERT INTO tool_calls (key, conversation, turn, name, call, status, result, started_at, done_at) VALUES (?, ?, ?, 'clock__now', '{}', 'done', '{}', ?, ?)";
    const running = unique("running");
    await script(running, [{ text: "Done at last.", hold: true }]);
    await postMessage(tenant, name, { text: `[s:${running}] a long one`, conversation: running });
    await waitFor("the long turn to wait on the model", async () => (await providerRequests(running)).length > 0);
    await rows(tenant, name, call, "call:old", live, 1, past, past);
    await rows(tenant, name, call, "call:recent", live, 1, Date.now(), Date.now());
    await rows(tenant, name, call, "call:running", running, 1, past, past);
    // A model job settled two days ago leaves (runtime/models/jobs.ts keeps them a day); one settled now stays.
    const job = "INSERT INTO model_jobs (id, conversation, turn, purpose, status, created_at, settled_at) VALUES (?, ?, 1, 'chat', 'done', ?, ?)";
    await rows(tenant, name, job, "job:old", live, past, Date.now() - 2 * DAY_MS);
    await rows(tenant, name, job, "job:recent", live, Date.now(), Date.now());

    await evict(tenant, name);
    await runInDurableObject(agent(tenant, name), (_instance, state) => state.storage.setAlarm(Date.now()));
    await waitFor("the old inbound id to leave", async () => (await rows(tenant, name, "SELECT 1 FROM inbound WHERE event_id = 'api:ancient'")).length === 0);
    expect((await rows<{ id: number }>(tenant, name, "SELECT id FROM outbox WHERE conversation = ?", live)).map((r) => r.id)).toEqual([recentSend!.id]);
    expect(oldSend!.id).not.toBe(recentSend!.id);
    expect((await rows<{ key: string }>(tenant, name, "SELECT key FROM tool_calls WHERE key LIKE 'call:%' ORDER BY key")).map((r) => r.key)).toEqual(["call:recent", "call:running"]);
    await releaseProvider(running);
    await settled(tenant, name, running);
    expect((await rows<{ id: string }>(tenant, name, "SELECT id FROM model_jobs WHERE id LIKE 'job:%'")).map((r) => r.id)).toEqual(["job:recent"]);
    expect(await rows(tenant, name, "SELECT event_id FROM inbound WHERE event_id = 'api:recent'")).toHaveLength(1);

    const retry = await postMessage(tenant, name, { text: "again", conversation: live }, { "idempotency-key": "recent" });
    expect(await retry.json()).toMatchObject({ accepted: false });
    expect((await getConversation(tenant, name, live)).transcript.filter((e) => e.text === "again")).toHaveLength(1);
  });
});

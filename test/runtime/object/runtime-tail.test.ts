// A turn reads the tail of its conversation, not the whole log: the rows from
// the last handover's kept tail (or the turn's start) on, and its other tables
// through indexes. Measured by the object's own SQLite: every query a turn
// makes is counted with its cursor's `rowsRead`, early in a conversation and
// again once its log has grown about four times longer; the test's own reads
// are not counted. The figure compared is the most rows one query read: a
// read of the whole log, or a scan of a conversation's rows in another table,
// grows with the conversation, while how many queries a turn makes depends on
// how its passes happened to fall. Through the Agents API, and in a Slack
// thread (whose every turn also posts and updates a status message: the
// outbox's rows grow too).
import { runInDurableObject } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { agent } from "../../agents.ts";
import { chooseModels, postMessage, script, unique, waitFor } from "../../support.ts";
import { AGENT as SLACK_AGENT, conversationOf, messageEnvelope, newTs, postEvent, slackId } from "../../bridges/slack/helpers.ts";

/** About 770 tokens a message: the fake's 8,000-token window fills in about six turns. */
const FILLER = Array.from({ length: 780 }, (_, i) => `w${i % 89}`).join(" ");

/** Keeps every cursor the object opens while `on`, to count the rows each read. */
interface RowsMeter {
  on: boolean;
  cursors: { query: string; cursor: SqlStorageCursor<Record<string, SqlStorageValue>> }[];
}

/** The most rows one query read, and which. */
interface MostRead {
  rows: number;
  query: string;
}

type MeteredSql = SqlStorage & { meter?: RowsMeter };

/** The object's SqlStorage, its `exec` wrapped once so the cursors it returns can be counted. */
function installMeter(tenant: string, name: string): Promise<void> {
  return runInDurableObject(agent(tenant, name), (_instance, state) => {
    const sql = state.storage.sql as MeteredSql;
    if (sql.meter) return;
    const exec = sql.exec.bind(sql);
    const meter: RowsMeter = { on: false, cursors: [] };
    // A cursor is read to its end by its caller; its count is taken when the meter is read.
    sql.exec = ((query: string, ...bindings: SqlStorageValue[]) => {
      const cursor = exec(query, ...bindings);
      if (meter.on) meter.cursors.push({ query, cursor });
      return cursor;
    }) as SqlStorage["exec"];
    sql.meter = meter;
  });
}

/** Runs `read` on the object's storage with the meter off (the test's reads are not the turn's). */
function unmetered<T>(tenant: string, name: string, read: (storage: DurableObjectStorage) => T | Promise<T>): Promise<T> {
  return runInDurableObject(agent(tenant, name), async (_instance, state) => {
    const meter = (state.storage.sql as MeteredSql).meter!;
    const on = meter.on;
    meter.on = false;
    try {
      return await read(state.storage);
    } finally {
      meter.on = on;
    }
  });
}

interface Chat {
  tenant: string;
  name: string;
  conversation: string;
  /** Sends a person's message, or `compact`. */
  send(text: string | "compact"): Promise<void>;
}

function apiChat(): Chat {
  const tenant = unique("tail-api");
  const conversation = unique("c");
  return {
    tenant,
    name: "scribe",
    conversation,
    async send(text) {
      const body = text === "compact" ? { kind: "command", command: "compact" } : { text };
      expect((await postMessage(tenant, "scribe", { conversation, ...body })).status).toBe(202);
    },
  };
}

function slackChat(): Chat {
  const team = slackId("T");
  const channel = slackId("C");
  const threadTs = newTs();
  let first = true;
  return {
    tenant: team,
    name: SLACK_AGENT,
    conversation: conversationOf(team, channel, threadTs),
    async send(text) {
      const ts = first ? threadTs : newTs();
      const envelope = messageEnvelope({ team, channel, ts, text: text === "compact" ? "compact" : text, ...(first ? {} : { thread_ts: threadTs, mention: true }) });
      first = false;
      expect((await postEvent(envelope)).status).toBe(200);
    },
  };
}

/** Sends and waits until the turn `turn` has ended and the object has nothing armed (every send made). */
async function turn(chat: Chat, turnNumber: number, text: string): Promise<void> {
  await chat.send(text);
  await waitFor(
    `turn ${turnNumber} of ${chat.conversation}`,
    () =>
      unmetered(chat.tenant, chat.name, async (storage) => {
        const conv = storage.sql.exec<{ turn: number; status: string }>("SELECT turn, status FROM conversations WHERE id = ?", chat.conversation).toArray()[0];
        if (conv?.status === "failed") throw new Error(`turn ${turnNumber} failed`);
        return conv?.turn === turnNumber && conv.status === "idle" && (await storage.getAlarm()) === null;
      }),
    20_000,
  );
}

/** The most rows one query read in one turn: the message, its passes, its effects' claims and reports. */
async function mostReadBy(chat: Chat, turnNumber: number, text: string): Promise<MostRead> {
  const meter = (storage: DurableObjectStorage) => (storage.sql as MeteredSql).meter!;
  await runInDurableObject(agent(chat.tenant, chat.name), (_instance, state) => {
    meter(state.storage).cursors = [];
    meter(state.storage).on = true;
  });
  await turn(chat, turnNumber, text);
  return runInDurableObject(agent(chat.tenant, chat.name), (_instance, state) => {
    const { cursors } = meter(state.storage);
    meter(state.storage).on = false;
    expect(cursors.length).toBeGreaterThan(10); // the meter saw the turn
    return cursors.reduce<MostRead>((most, { query, cursor }) => (cursor.rowsRead > most.rows ? { rows: cursor.rowsRead, query } : most), { rows: 0, query: "" });
  });
}

const logRows = (chat: Chat) =>
  unmetered(chat.tenant, chat.name, (storage) => storage.sql.exec<{ n: number }>("SELECT COUNT(*) AS n FROM log WHERE conversation = ?", chat.conversation).one().n);

describe("a turn reads the tail of its conversation", () => {
  for (const [via, open, lateTurns] of [
    ["the Agents API", apiChat, 38],
    ["a Slack thread", slackChat, 30],
  ] as const) {
    it(`${via}: reads as many rows late as early, though the log has grown about four times`, { timeout: 240_000 }, async () => {
      const chat = open();
      await chooseModels({ [chat.tenant]: "fake/small-output" });
      const s = unique("tail");
      await script(s, [{ text: "Noted." }]);
      let k = 0;
      const say = () => `[s:${s}] turn ${k}: ${FILLER}`;
      await installMeter(chat.tenant, chat.name);
      const grow = async (to: number) => {
        while (k < to) await turn(chat, ++k, say());
      };
      // Each measured turn follows a person's compaction, so both read a tail of the same shape.
      const measure = async () => {
        await turn(chat, ++k, "compact");
        return mostReadBy(chat, ++k, say());
      };

      await grow(6);
      const early = await measure();
      const earlyLog = await logRows(chat);
      await grow(lateTurns);
      const late = await measure();
      const lateLog = await logRows(chat);

      expect(lateLog).toBeGreaterThan(3.5 * earlyLog);
      expect(late.rows, `late: ${late.query}`).toBeLessThanOrEqual(early.rows * 1.2);
      expect(late.rows).toBeLessThan(lateLog / 2);
    });
  }
});

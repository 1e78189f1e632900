// Versioned migrations (lib/migrations.ts, docs/design.md "Migrations"): a
// store's list is applied once, in one transaction; a failure rolls back and
// names the migration, and an agent object whose migration failed takes no
// step and answers 503 until a deploy fixes it. Every store's first migration
// adopts the tables an unversioned release wrote.
import { env } from "cloudflare:workers";
import { runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { type Migration, MigrationError, runMigrations, schemaVersion } from "../../../lib/migrations.ts";
import previous from "../../fixtures/upgrade/stores.sql?raw";
import { agent, evict, fireAlarm, rows, schemaOf } from "../../agents.ts";
import { answered, postMessage, script, settled, unique, worker } from "../../support.ts";

const A = "keeper";
const ADMIN = { authorization: "Bearer test-admin-token" };

/** An object's storage that nothing was ever written to (an agent object writes nothing until its first event). */
function inEmptyStorage<T>(fn: (storage: DurableObjectStorage) => T): Promise<T> {
  return runInDurableObject(agent("migrations", crypto.randomUUID()), (_instance, state) => fn(state.storage));
}

const tableNames = (storage: DurableObjectStorage) => schemaOf(storage).filter((entry) => entry.startsWith("table "));

describe("the runner", () => {
  const first: Migration[] = [
    { name: "notes", sql: "CREATE TABLE notes (id INTEGER PRIMARY KEY, text TEXT NOT NULL)" },
    { name: "tags", sql: "CREATE TABLE tags (note INTEGER NOT NULL, tag TEXT NOT NULL); INSERT INTO notes (text) VALUES ('seeded once')" },
  ];

  it("applies the list in order and records it; run again, it applies nothing", () =>
    inEmptyStorage((storage) => {
      runMigrations(storage, first);
      expect(schemaVersion(storage.sql)).toBe(2);
      expect(tableNames(storage)).toEqual([expect.stringMatching(/^table meta:/), expect.stringMatching(/^table notes:/), expect.stringMatching(/^table tags:/)]);
      // A second run would fail on CREATE TABLE notes, or seed twice.
      runMigrations(storage, first);
      expect(storage.sql.exec("SELECT text FROM notes").toArray()).toEqual([{ text: "seeded once" }]);
    }));

  it("a migration added later is applied alone; one that fails is rolled back whole and named", () =>
    inEmptyStorage((storage) => {
      runMigrations(storage, first);
      const before = schemaOf(storage);
      const broken: Migration = { name: "colours", sql: "ALTER TABLE tags ADD COLUMN colour TEXT; CREATE TABLE palettes (name TEXT); INSERT INTO nowhere VALUES (1)" };
      let thrown: unknown;
      try {
        runMigrations(storage, [...first, { name: "pinned", sql: "ALTER TABLE notes ADD COLUMN pinned INTEGER NOT NULL DEFAULT 0" }, broken]);
      } catch (err) {
        thrown = err;
      }
      expect(thrown).toBeInstanceOf(MigrationError);
      expect((thrown as MigrationError).message).toMatch(/^schema migration 4 \(colours\) failed and was rolled back \(.*nowhere/);
      // Neither the failed migration's first statements nor the one before it in the same run were kept.
      expect(schemaOf(storage)).toEqual(before);
      expect(schemaVersion(storage.sql)).toBe(2);
      runMigrations(storage, [...first, { name: "pinned", sql: "ALTER TABLE notes ADD COLUMN pinned INTEGER NOT NULL DEFAULT 0" }]);
      expect(schemaVersion(storage.sql)).toBe(3);
    }));

  it("a storage newer than the list (a rollback to an older deploy) is left as it is", () =>
    inEmptyStorage((storage) => {
      runMigrations(storage, first);
      runMigrations(storage, first.slice(0, 1));
      expect(schemaVersion(storage.sql)).toBe(2);
    }));
});

describe("an agent object whose migration fails", () => {
  it("is rolled back, takes no step and answers 503 naming the migration, everywhere; a deploy that fixes it brings it back", async () => {
    const tenant = unique("mig");
    const conversation = unique("c");
    const s = unique("s");
    await script(s, [{ text: "before" }, { text: "after the fix" }]);
    await postMessage(tenant, A, { text: `[s:${s}] hello`, conversation });
    await settled(tenant, A, conversation);
    // Version 6 recorded and migration 7's first column gone: 7 adds it, then fails on its second, which is there.
    const before = await runInDurableObject(agent(tenant, A), async (_instance, state) => {
      const version = schemaVersion(state.storage.sql);
      state.storage.sql.exec("UPDATE meta SET value = '6' WHERE key = 'schema_version'; ALTER TABLE model_jobs DROP COLUMN limited_since");
      await state.storage.setAlarm(Date.now() + 60_000);
      return { version, schema: schemaOf(state.storage) };
    });
    const logBefore = await rows(tenant, A, "SELECT seq FROM log");
    await evict(tenant, A);

    const named = /schema migration 7 \(model rate limits\) failed and was rolled back \(.*busy_told/;
    const submitted = await postMessage(tenant, A, { text: "are you there?", conversation });
    expect(submitted.status).toBe(503);
    expect(((await submitted.json()) as { error: string }).error).toMatch(named);
    const read = await worker(`/v1/tenants/${tenant}/agents/${A}/conversations/${conversation}`, { headers: ADMIN });
    expect(read.status).toBe(503);
    expect(((await read.json()) as { error: string }).error).toMatch(named);
    const page = await worker(`/console/tenants/${tenant}/agents/${A}`, { headers: ADMIN });
    expect(page.status).toBe(503);
    expect(await page.text()).toMatch(named);
    await expect(agent(tenant, A).report({ tenant, agent: A }, "send", "1", { ok: true, ref: "x" } as never)).rejects.toThrow(named);
    await expect(fireAlarm(tenant, A)).rejects.toThrow(named);

    const after = await runInDurableObject(agent(tenant, A), (_instance, state) => ({ schema: schemaOf(state.storage), version: schemaVersion(state.storage.sql) }));
    expect(after).toEqual({ schema: before.schema, version: 6 });
    expect(await rows(tenant, A, "SELECT seq FROM log")).toEqual(logBefore);

    // A deploy that fixes it (here: the storage put back as the migrations leave it), and it serves again.
    await rows(tenant, A, "ALTER TABLE model_jobs ADD COLUMN limited_since INTEGER");
    await rows(tenant, A, "UPDATE meta SET value = ? WHERE key = 'schema_version'", String(before.version));
    await evict(tenant, A);
    expect((await postMessage(tenant, A, { text: "and now?", conversation })).status).toBe(202);
    await answered(tenant, A, conversation, "after the fix");
  });
});

/** Restarts an object, as a deploy does: memory gone, storage kept (a stub used for it is spent: each call below takes a new one). */
async function restart(object: () => DurableObjectStub): Promise<void> {
  await runInDurableObject(object(), (_instance, state) => state.abort("restarted by the test")).catch(() => undefined);
}

/** Each other store as the release before versioning left it, by binding: its tables and rows (test/fixtures/upgrade/stores.sql). */
const previousRelease = new Map(
  previous
    .split(/^-- store: /m)
    .filter((part) => part.trim() !== "")
    .map((part) => [part.slice(0, part.indexOf("\n")), part.slice(part.indexOf("\n") + 1)]),
);

/**
 * Each store other than the agent object: its namespace, a table its first
 * migration creates, and how it is woken (a courier makes its table on its
 * first task, which its alarm resumes; the others in their constructor).
 */
const stores = [
  { binding: "LEDGER", table: "tenant_limit", onAlarm: false },
  { binding: "CONTROL", table: "directory", onAlarm: false },
  { binding: "PROVIDER_GATE", table: "gate", onAlarm: false },
  { binding: "COURIER", table: "tasks", onAlarm: true },
] as const;

/** How many rows each table holds. */
function rowCounts(storage: DurableObjectStorage): Record<string, number> {
  const names = storage.sql.exec<{ name: string }>("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' AND name NOT LIKE '_cf_%'").toArray();
  return Object.fromEntries(names.map(({ name }) => [name, storage.sql.exec<{ n: number }>(`SELECT count(*) AS n FROM "${name}"`).one().n]));
}

/**
 * A courier's alarm is set this far out and run by the test at once: an alarm
 * due now is also fired by workerd itself, which takes it from storage before
 * its event reaches the object, so the test's run found none and the store
 * could be read before the alarm had run (version 0, in one full-suite run).
 */
const NOT_BY_ITSELF_MS = 3_600_000;

describe.each(stores)("the $binding store", ({ binding, table, onAlarm }) => {
  /** Wakes the store on this code: its constructor, or its alarm, run here and now; a courier's alarm throws when its table is gone (`tableGone`). */
  async function wake(object: () => DurableObjectStub, tableGone = false): Promise<void> {
    if (!onAlarm) return runInDurableObject(object(), () => undefined);
    await runInDurableObject(object(), (_instance, state) => state.storage.setAlarm(Date.now() + NOT_BY_ITSELF_MS));
    if (tableGone) await expect(runDurableObjectAlarm(object())).rejects.toThrow(/no such table/);
    else expect(await runDurableObjectAlarm(object())).toBe(true);
  }
  const state = (object: () => DurableObjectStub) => runInDurableObject(object(), (_instance, { storage }) => ({ version: schemaVersion(storage.sql), schema: schemaOf(storage) }));

  it("adopts the store the release before versioning left, rows and all, then never runs its list again", async () => {
    const namespace = (env as unknown as Record<string, DurableObjectNamespace>)[binding]!;
    const id = namespace.idFromName(`migrations:${crypto.randomUUID()}`);
    const object = () => namespace.get(id);
    await wake(object);
    const fresh = await state(object);
    expect(fresh.version).toBeGreaterThan(0);
    // The same object as the previous release left it: its tables (created IF NOT EXISTS on every wake) and rows, no version.
    const written = await runInDurableObject(object(), (_instance, { storage }) => {
      for (const name of Object.keys(rowCounts(storage))) storage.sql.exec(`DROP TABLE "${name}"`);
      storage.sql.exec(previousRelease.get(binding)!);
      return rowCounts(storage);
    });
    expect(written).not.toHaveProperty("meta");
    await restart(object);
    await wake(object);
    expect(await state(object)).toEqual(fresh);
    expect(await runInDurableObject(object(), (_instance, { storage }) => rowCounts(storage))).toMatchObject(written);

    // A second boot applies nothing: a table its first migration creates, dropped, stays dropped.
    await runInDurableObject(object(), (_instance, { storage }) => void storage.sql.exec(`DROP TABLE ${table}`));
    await restart(object);
    await wake(object, true);
    expect((await state(object)).schema.some((entry) => entry.startsWith(`table ${table}:`))).toBe(false);
  });
});

// Retention (issue 24): a settled conversation untouched for RETENTION_DAYS is
// archived to R2, one gzip JSON object per conversation, and its rows are
// deleted. Its conversations row stays, marked archived_at, so lists and usage
// still show it and a message to it restores it first (the one wait on R2 in a
// call, once per archived conversation). Inbound ids, settled chat sends and
// the tool calls of ended turns past their dedupe window are deleted too
// (settled model jobs go after a day: runtime/models/jobs.ts).
//
// The work runs at the end of a pass that happens anyway, in bounded slices,
// and only while no turn runs and no conversation is marked for a pass (once
// an hour a busy object's pass takes one slice all the same, so a backlog
// cannot starve). A slice that found more asks for another pass at once
// (nextDue) and nothing after that: a turn waits at most for the slice under
// way when it came, and an idle object keeps no alarm (invariant 3).
import type { Route } from "../chat.ts";

/** Conversations archived per slice: their R2 writes side by side, then one transaction. */
export const ARCHIVE_SLICE = 100;
/** Inbound ids, settled sends and ended turns' tool calls are kept this long: a platform retries within minutes (Slack within an hour), an effect is given up within hours. */
export const DEDUPE_WINDOW_MS = 7 * 86_400_000;
/** Rows of each pruned table deleted per slice. */
const PRUNE_SLICE = 1_000;
/** A slice at most this often with no backlog; and at least this often while turns keep running. */
const SWEEP_MS = 3_600_000;

/**
 * The tables whose rows belong to one conversation (its `conversation` column): archived and restored whole.
 * The feed first: put back before the log and the holds, it keeps their triggers from adding rows again.
 */
const CONVERSATION_TABLES = ["feed", "log", "tool_calls", "holds", "outbox", "busy_turns"] as const;
type ArchivedTable = (typeof CONVERSATION_TABLES)[number];
type StoredRow = Record<string, SqlStorageValue>;

/** The R2 object of one archived conversation (gzip JSON). */
export interface ConversationArchive {
  format: 1;
  conversation: string;
  /** Its updated_at when archived: a change meanwhile keeps it. */
  updatedAt: number;
  archivedAt: number;
  rows: Record<ArchivedTable, StoredRow[]>;
}

/** Where a conversation's archive lives in the bucket. */
export function archiveKey(route: Route, conversation: string): string {
  return `archive/${[route.tenant, route.agent, conversation].map(encodeURIComponent).join("/")}.json.gz`;
}

/** Nothing open: no turn, mark, inbox, effect (but an audit row on its way to the trail: it outlives the conversation), lease, pending send, job or undecided hold. */
const QUIET = `c.status != 'running' AND c.pass_due = 0
  AND NOT EXISTS (SELECT 1 FROM inbox i WHERE i.conversation = c.id)
  AND NOT EXISTS (SELECT 1 FROM effects e WHERE e.conversation = c.id AND e.kind != 'audit')
  AND NOT EXISTS (SELECT 1 FROM leases l WHERE l.conversation = c.id)
  AND NOT EXISTS (SELECT 1 FROM outbox o WHERE o.conversation = c.id AND o.status = 'pending')
  AND NOT EXISTS (SELECT 1 FROM model_jobs j WHERE j.conversation = c.id AND j.status = 'pending')
  AND NOT EXISTS (SELECT 1 FROM holds h WHERE h.conversation = c.id AND h.status IN ('pending', 'approved', 'running'))`;
/** Settled: quiet and not archived. */
const SETTLED = `c.archived_at IS NULL AND ${QUIET}`;

/** Thrown to roll back the transaction a read of an archive builds its view in. */
const READ_ONLY = Symbol("read only");

export class Retention {
  private readonly sql: SqlStorage;
  private lastSweep = 0;
  /** The last slice was full: another pass goes on at once. */
  private more = false;

  constructor(
    private readonly storage: DurableObjectStorage,
    private readonly bucket: R2Bucket,
    /** RETENTION_DAYS in ms (config.ts); read at each slice, so a bad value fails the slice, naming it. */
    private readonly keepMs: () => number,
  ) {
    this.sql = storage.sql;
  }

  /** Now while a backlog remains and no turn runs; otherwise no alarm of retention's. */
  nextDue(): number | null {
    return this.more && !this.anyBusy() ? Date.now() : null;
  }

  /** One bounded slice when it is due (after each pass: runtime/object/agent-object.ts). */
  async slice(route: Route): Promise<void> {
    const swept = Date.now() - this.lastSweep >= SWEEP_MS;
    // In-memory first: most passes find nothing due and ask SQLite nothing.
    if (!((this.more && !this.anyBusy()) || swept) || this.anyMarked()) return;
    this.lastSweep = Date.now();
    try {
      const pruned = this.storage.transactionSync(() => this.prune(Date.now() - DEDUPE_WINDOW_MS));
      const archives = this.candidates(Date.now() - this.keepMs()).map((id) => this.collect(id));
      await Promise.all(archives.map(async (archive) => this.bucket.put(archiveKey(route, archive.conversation), await gzip(JSON.stringify(archive)))));
      this.storage.transactionSync(() => archives.forEach((archive) => this.retire(archive)));
      this.more = pruned || archives.length === ARCHIVE_SLICE;
    } catch (err) {
      // Retention can wait: the next sweep tries again, and no alarm loops meanwhile.
      console.error("a retention slice failed", err);
      this.more = false;
    }
  }

  /**
   * Deletes a quiet conversation for good (the Agents API's DELETE): its rows,
   * its settled jobs and its archive. Its inbound event ids stay until they
   * age out, so a platform's late retry does not bring it back.
   */
  async forget(route: Route, id: string): Promise<"deleted" | "busy" | "missing"> {
    const outcome = this.storage.transactionSync(() => {
      if (this.sql.exec("SELECT 1 FROM conversations WHERE id = ?", id).toArray().length === 0) return "missing";
      if (this.sql.exec(`SELECT 1 FROM conversations c WHERE c.id = ? AND ${QUIET}`, id).toArray().length === 0) return "busy";
      for (const table of [...CONVERSATION_TABLES, "model_jobs"]) this.sql.exec(`DELETE FROM ${table} WHERE conversation = ?`, id);
      this.sql.exec("DELETE FROM conversations WHERE id = ?", id);
      return "deleted";
    });
    if (outcome === "deleted") await this.bucket.delete(archiveKey(route, id));
    return outcome;
  }

  isArchived(conversation: string): boolean {
    return this.sql.exec("SELECT 1 FROM conversations WHERE id = ? AND archived_at IS NOT NULL", conversation).toArray().length > 0;
  }

  /** A message to an archived conversation: its rows come back from R2 before the message is recorded. */
  async restore(route: Route, conversation: string): Promise<void> {
    if (!this.isArchived(conversation)) return;
    const archive = await this.fetch(route, conversation);
    this.storage.transactionSync(() => {
      // Restored meanwhile by another message.
      if (!this.isArchived(conversation)) return;
      if (archive) this.putBack(archive);
      else console.error(`conversation ${conversation}: its archive is missing from R2; it goes on without its history`);
      this.sql.exec("UPDATE conversations SET archived_at = NULL WHERE id = ?", conversation);
    });
    // Not awaited: the caller records the message first, so no slice archives the conversation again in between.
    this.bucket.delete(archiveKey(route, conversation)).catch((err: unknown) => console.warn(`could not delete the archive of ${conversation}`, err));
  }

  /**
   * What `view` shows of a conversation, archived or not: an archived one's
   * rows are put back in a transaction that is then rolled back, so the
   * object's own view code reads it and nothing is written.
   */
  async read<T>(route: Route, conversation: string, view: () => T): Promise<T> {
    if (!this.isArchived(conversation)) return view();
    const archive = await this.fetch(route, conversation);
    let shown: T | undefined;
    try {
      this.storage.transactionSync(() => {
        if (archive && this.isArchived(conversation)) this.putBack(archive);
        shown = view();
        throw READ_ONLY;
      });
    } catch (err) {
      if (err !== READ_ONLY) throw err;
    }
    return shown as T;
  }

  // ---- archiving ---------------------------------------------------------------

  /** The oldest settled conversations untouched since `before`. */
  private candidates(before: number): string[] {
    return this.sql
      .exec<{ id: string }>(`SELECT c.id FROM conversations c WHERE c.updated_at < ? AND ${SETTLED} ORDER BY c.updated_at LIMIT ?`, before, ARCHIVE_SLICE)
      .toArray()
      .map((row) => row.id);
  }

  private collect(conversation: string): ConversationArchive {
    const updatedAt = this.sql.exec<{ updated_at: number }>("SELECT updated_at FROM conversations WHERE id = ?", conversation).one().updated_at;
    const rows = Object.fromEntries(CONVERSATION_TABLES.map((table) => [table, this.sql.exec<StoredRow>(`SELECT * FROM ${table} WHERE conversation = ?`, conversation).toArray()]));
    return { format: 1, conversation, updatedAt, archivedAt: Date.now(), rows: rows as ConversationArchive["rows"] };
  }

  /** Deletes what was archived, unless the conversation changed while its archive was written (a later slice looks again). */
  private retire(archive: ConversationArchive): void {
    const id = archive.conversation;
    const unchanged =
      this.sql.exec(`SELECT 1 FROM conversations c WHERE c.id = ? AND c.updated_at = ? AND ${SETTLED}`, id, archive.updatedAt).toArray().length > 0 &&
      CONVERSATION_TABLES.every((table) => this.sql.exec<{ n: number }>(`SELECT COUNT(*) AS n FROM ${table} WHERE conversation = ?`, id).one().n === archive.rows[table].length);
    if (!unchanged) return;
    for (const table of CONVERSATION_TABLES) this.sql.exec(`DELETE FROM ${table} WHERE conversation = ?`, id);
    this.sql.exec("UPDATE conversations SET archived_at = ? WHERE id = ?", archive.archivedAt, id);
  }

  private putBack(archive: ConversationArchive): void {
    for (const table of CONVERSATION_TABLES) {
      for (const row of archive.rows[table] ?? []) {
        const columns = Object.keys(row);
        if (!columns.every((name) => /^[a-z_]+$/.test(name))) throw new Error(`the archive of ${archive.conversation} names a column that is not one`);
        this.sql.exec(`INSERT INTO ${table} (${columns.join(", ")}) VALUES (${columns.map(() => "?").join(", ")})`, ...Object.values(row));
      }
    }
  }

  private async fetch(route: Route, conversation: string): Promise<ConversationArchive | null> {
    const object = await this.bucket.get(archiveKey(route, conversation));
    return object ? (JSON.parse(await gunzip(object.body)) as ConversationArchive) : null;
  }

  // ---- deleting by age -----------------------------------------------------------

  /** Inbound ids, settled sends and the tool calls of ended turns past the dedupe window, a bounded number of each; true when more remain. */
  private prune(before: number): boolean {
    const deleted = [
      "DELETE FROM inbound WHERE rowid IN (SELECT rowid FROM inbound WHERE at < ? LIMIT ?) RETURNING 1",
      "DELETE FROM outbox WHERE id IN (SELECT id FROM outbox WHERE status != 'pending' AND created_at < ? LIMIT ?) RETURNING 1",
      // A running turn's calls stay, however old: its replay reads them.
      `DELETE FROM tool_calls WHERE key IN (SELECT t.key FROM tool_calls t WHERE t.status = 'done' AND t.done_at < ?
         AND NOT EXISTS (SELECT 1 FROM conversations c WHERE c.id = t.conversation AND c.status = 'running' AND c.turn = t.turn) LIMIT ?) RETURNING 1`,
    ].map((statement) => this.sql.exec(statement, before, PRUNE_SLICE).toArray().length);
    return deleted.some((count) => count === PRUNE_SLICE);
  }

  private anyMarked(): boolean {
    return this.sql.exec("SELECT 1 FROM conversations WHERE pass_due = 1 LIMIT 1").toArray().length > 0;
  }

  /** A turn runs, or a conversation waits for a pass. */
  private anyBusy(): boolean {
    return this.anyMarked() || this.sql.exec("SELECT 1 FROM conversations WHERE status = 'running' LIMIT 1").toArray().length > 0;
  }
}

async function gzip(text: string): Promise<ArrayBuffer> {
  return new Response(new Blob([text]).stream().pipeThrough(new CompressionStream("gzip"))).arrayBuffer();
}

async function gunzip(body: ReadableStream): Promise<string> {
  return new Response(body.pipeThrough(new DecompressionStream("gzip"))).text();
}

// Retention: a settled conversation untouched for RETENTION_DAYS is archived
// to R2 and its rows deleted (its conversations row stays, marked archived_at,
// and a message to it restores it first); old inbound ids, settled sends and
// ended turns' tool calls are deleted. It runs in bounded slices at the end of
// passes that happen anyway, so an idle object keeps no alarm (docs/design.md,
// "Retention"). Other rooms' rows it is handed by the object (RetainedRows).
import type { ConversationRows, StoredRow } from "../../lib/conversation-rows.ts";
import type { Route } from "../chat.ts";

/** Conversations archived per slice: their R2 writes side by side, then one transaction. */
export const ARCHIVE_SLICE = 100;
/** Inbound ids, settled sends and ended turns' tool calls are kept this long: a platform retries within minutes (Slack within an hour), an effect is given up within hours. */
export const DEDUPE_WINDOW_MS = 7 * 86_400_000;
/** Rows of each pruned table deleted per slice. */
const PRUNE_SLICE = 1_000;
/** A slice at most this often with no backlog; and at least this often while turns keep running. */
const SWEEP_MS = 3_600_000;

/** The tables an archive holds, by name: the feed, the log, the tool calls, the holds, the outbox and the turns' busy time. */
export type ArchivedTable = "feed" | "log" | "tool_calls" | "holds" | "outbox" | "busy_turns";

/** What the rooms that own a conversation's other rows do for retention, each on its own tables. */
export interface RetainedRows {
  /**
   * Archived and restored whole with a conversation, in this order: the feed
   * first (put back before the log and the holds, it keeps their triggers from
   * adding rows again).
   */
  readonly tables: readonly ConversationRows<ArchivedTable>[];
  /** The conversations another room has work open on: an effect (but an audit row on its way to the trail: it outlives the conversation), a lease, a pending send, job or undecided hold. */
  busy(): Set<string>;
  /** Deletes what else a conversation deleted for good leaves (its settled model jobs). */
  forget(conversation: string): void;
  /** Each deletes its settled rows past the dedupe window (sends, ended turns' tool calls), at most `limit`, and says how many went. */
  readonly prune: readonly ((before: number, limit: number) => number)[];
}

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

/** Nothing open here: no turn, mark or inbox (the other rooms' open work, RetainedRows.busy says). */
const QUIET = `c.status != 'running' AND c.pass_due = 0
  AND NOT EXISTS (SELECT 1 FROM inbox i WHERE i.conversation = c.id)`;
/** Settled here: quiet and not archived. */
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
    private readonly rows: RetainedRows,
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
      this.storage.transactionSync(() => {
        const busy = this.rows.busy();
        archives.forEach((archive) => this.retire(archive, busy));
      });
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
      if (this.sql.exec(`SELECT 1 FROM conversations c WHERE c.id = ? AND ${QUIET}`, id).toArray().length === 0 || this.rows.busy().has(id)) return "busy";
      for (const table of this.rows.tables) table.remove(id);
      this.rows.forget(id);
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

  /** The oldest settled conversations untouched since `before`, read until a slice's worth has nothing open in another room either. */
  private candidates(before: number): string[] {
    const busy = this.rows.busy();
    const settled: string[] = [];
    for (const { id } of this.sql.exec<{ id: string }>(`SELECT c.id FROM conversations c WHERE c.updated_at < ? AND ${SETTLED} ORDER BY c.updated_at`, before)) {
      if (busy.has(id)) continue;
      settled.push(id);
      if (settled.length === ARCHIVE_SLICE) break;
    }
    return settled;
  }

  private collect(conversation: string): ConversationArchive {
    const updatedAt = this.sql.exec<{ updated_at: number }>("SELECT updated_at FROM conversations WHERE id = ?", conversation).one().updated_at;
    const rows = Object.fromEntries(this.rows.tables.map((table) => [table.table, table.of(conversation)]));
    return { format: 1, conversation, updatedAt, archivedAt: Date.now(), rows: rows as ConversationArchive["rows"] };
  }

  /** Deletes what was archived, unless the conversation changed while its archive was written (a later slice looks again). */
  private retire(archive: ConversationArchive, busy: ReadonlySet<string>): void {
    const id = archive.conversation;
    const unchanged =
      this.sql.exec(`SELECT 1 FROM conversations c WHERE c.id = ? AND c.updated_at = ? AND ${SETTLED}`, id, archive.updatedAt).toArray().length > 0 &&
      !busy.has(id) &&
      this.rows.tables.every((table) => table.count(id) === archive.rows[table.table].length);
    if (!unchanged) return;
    for (const table of this.rows.tables) table.remove(id);
    this.sql.exec("UPDATE conversations SET archived_at = ? WHERE id = ?", archive.archivedAt, id);
  }

  private putBack(archive: ConversationArchive): void {
    for (const table of this.rows.tables) {
      for (const row of archive.rows[table.table] ?? []) table.putBack(row, `the archive of ${archive.conversation}`);
    }
  }

  private async fetch(route: Route, conversation: string): Promise<ConversationArchive | null> {
    const object = await this.bucket.get(archiveKey(route, conversation));
    return object ? (JSON.parse(await gunzip(object.body)) as ConversationArchive) : null;
  }

  // ---- deleting by age -----------------------------------------------------------

  /** Inbound ids, then the other rooms' settled rows (sends, the tool calls of ended turns) past the dedupe window, a bounded number of each; true when more remain. */
  private prune(before: number): boolean {
    const deleted = [
      this.sql.exec("DELETE FROM inbound WHERE rowid IN (SELECT rowid FROM inbound WHERE at < ? LIMIT ?) RETURNING 1", before, PRUNE_SLICE).toArray().length,
      ...this.rows.prune.map((prune) => prune(before, PRUNE_SLICE)),
    ];
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

// The model-job store: a job row is written before it leaves the object (as an
// effect), its request kept in SQLite (or in R2 when it is too large for a
// row), and settled once by the first outcome that reaches it; later ones
// change nothing. Settled jobs are pruned after a day.
import type { AssistantMessage } from "@mariozechner/pi-ai";
import { DAY_MS, dayStart, usageRow } from "../metering/index.ts";
import type { Effects } from "../effects/index.ts";

/** Requests larger than this go to R2; SQLite rows are capped at 2 MB. */
export const LARGE_REQUEST_BYTES = 1 << 20;
/** Settled jobs are kept this long (the ledger keeps their usage), then pruned. */
const KEEP_SETTLED_MS = 24 * 3_600_000;

export type JobPurpose = "chat" | "compact";

export type JobRow = {
  id: string;
  conversation: string;
  turn: number;
  purpose: JobPurpose;
  status: "pending" | "done" | "discarded" | "failed";
  request: string | null;
  large_key: string | null;
  /** When the job first waited out its provider's rate limit (ms), if it did. */
  limited_since: number | null;
};

/** What a settled job means for its turn. */
export type Settled =
  | { kind: "reply"; message: AssistantMessage }
  /** `tooLong`: the provider refused the request as too long for the model (a compaction may help). */
  | { kind: "failed"; error: string; tooLong?: boolean; /** Told to the person as it is, not as a failure's reason. */ verbatim?: boolean };

/** Model calls and their usage, summed over jobs; `input` excludes the cached tokens read (`cached`) and written (`cacheWrite`). */
export type JobUsage = { calls: number; input: number; cached: number; cacheWrite: number; output: number; cost: number };

/** A conversation's usage today (UTC) and over the last 30 days (today and the 29 before), as a tenant's is shown. */
export type RecentUsage = { today: JobUsage; last30Days: JobUsage };

export class ModelJobs {
  private readonly sql: SqlStorage;

  constructor(
    storage: DurableObjectStorage,
    private readonly objectId: string,
    private readonly largeValues: R2Bucket,
    private readonly effects: Effects,
  ) {
    this.sql = storage.sql;
  }

  get(id: string): JobRow | undefined {
    return this.sql.exec<JobRow>("SELECT * FROM model_jobs WHERE id = ?", id).toArray()[0];
  }

  /** The conversation a job belongs to (busy time's attribution: runtime/metering/busy-time.ts). */
  conversationOf(id: string): string | undefined {
    return this.sql.exec<{ conversation: string }>("SELECT conversation FROM model_jobs WHERE id = ?", id).toArray()[0]?.conversation;
  }

  /** Deletes the conversation's jobs (a conversation deleted for good: runtime/store/archive.ts's forget). */
  forget(conversation: string): void {
    this.sql.exec("DELETE FROM model_jobs WHERE conversation = ?", conversation);
  }

  /** The conversations waiting for the model (retention keeps them: runtime/store/archive.ts). */
  openConversations(): Set<string> {
    return new Set(this.sql.exec<{ conversation: string }>("SELECT DISTINCT conversation FROM model_jobs WHERE status = 'pending'").toArray().map((row) => row.conversation));
  }

  /** True while the conversation waits for the model. */
  isOpen(conversation: string): boolean {
    return this.sql.exec("SELECT 1 FROM model_jobs WHERE conversation = ? AND status = 'pending' LIMIT 1", conversation).toArray().length > 0;
  }

  /** Jobs waiting for the model, of one conversation or all. */
  openCount(conversation?: string): number {
    const and = conversation === undefined ? "" : " AND conversation = ?";
    return this.sql.exec<{ n: number }>(`SELECT COUNT(*) AS n FROM model_jobs WHERE status = 'pending'${and}`, ...(conversation === undefined ? [] : [conversation])).one().n;
  }

  /** A conversation's calls since `since` (ms), by the jobs that came back with a reply. */
  usageSince(conversation: string, since: number): JobUsage {
    return this.#usage("created_at >= ?", conversation, since);
  }

  /** Read from the conversation's own rows (the conversation's index), not from all conversations'. */
  recentUsage(conversation: string, now: number): RecentUsage {
    const today = dayStart(now);
    return { today: this.usageSince(conversation, today), last30Days: this.usageSince(conversation, today - 29 * DAY_MS) };
  }

  /** The calls of one turn (what a Responses API response used). */
  usageOfTurn(conversation: string, turn: number): JobUsage {
    return this.#usage("turn = ?", conversation, turn);
  }

  #usage(where: string, conversation: string, value: number): JobUsage {
    return this.sql
      .exec<JobUsage>(
        `SELECT COUNT(model) AS calls, COALESCE(SUM(input_tokens), 0) AS input, COALESCE(SUM(cache_read_tokens), 0) AS cached, COALESCE(SUM(cache_write_tokens), 0) AS cacheWrite, COALESCE(SUM(output_tokens), 0) AS output, COALESCE(SUM(cost), 0) AS cost FROM model_jobs WHERE conversation = ? AND ${where} AND model IS NOT NULL`,
        conversation,
        value,
      )
      .one();
  }

  /** The turn's latest chat job that came back with a reply (the one its last assistant message came from). */
  lastReply(conversation: string, turn: number): string | undefined {
    return this.sql
      .exec<{ id: string }>("SELECT id FROM model_jobs WHERE conversation = ? AND turn = ? AND purpose = 'chat' AND status = 'done' ORDER BY rowid DESC LIMIT 1", conversation, turn)
      .toArray()[0]?.id;
  }

  /** A fresh job id; ids are never reused, so a late outcome can only reach its own job. */
  newId(conversation: string, turn: number, purpose: JobPurpose): string {
    return `${conversation}:${turn}:${crypto.randomUUID().slice(0, 8)}:${purpose}`;
  }

  /** Stores a request in R2 first when it is too large for a row; returns its key, or null when it fits. */
  async spill(id: string, body: string): Promise<string | null> {
    if (new TextEncoder().encode(body).byteLength <= LARGE_REQUEST_BYTES) return null;
    const key = `model-requests/${this.objectId}/${encodeURIComponent(id)}`;
    await this.largeValues.put(key, body);
    return key;
  }

  /** Writes the job row (`body` is the serialised request, unless spilled to `largeKey`) and its effect. */
  create(id: string, conversation: string, turn: number, purpose: JobPurpose, body: string, largeKey: string | null): void {
    this.sql.exec(
      "INSERT INTO model_jobs (id, conversation, turn, purpose, status, request, large_key, created_at) VALUES (?, ?, ?, ?, 'pending', ?, ?, ?)",
      id,
      conversation,
      turn,
      purpose,
      largeKey ? null : body,
      largeKey,
      Date.now(),
    );
    this.effects.add("model", id, conversation);
  }

  /** A pending job's request as it travels (JSON text), or "large" when it must be read from R2 (`largeRequest`). */
  request(id: string): string | "large" | null {
    const job = this.get(id);
    if (!job || job.status !== "pending") return null;
    return job.large_key ? "large" : job.request!;
  }

  /** A pending job's request kept in R2, or `lost` when it is gone. */
  async largeRequest(id: string): Promise<string | { lost: true } | null> {
    const job = this.get(id);
    if (!job || job.status !== "pending" || !job.large_key) return null;
    const object = await this.largeValues.get(job.large_key);
    return object ? object.text() : { lost: true };
  }

  /** Settles a pending job (once); the caller decides what it means for the turn. */
  settle(job: JobRow, settled: Settled): void {
    this.sql.exec("UPDATE model_jobs SET status = ?, settled_at = ?, request = NULL WHERE id = ?", settled.kind === "failed" ? "failed" : "done", Date.now(), job.id);
    this.effects.done("model", job.id);
  }

  /** What a reply's call used, kept with its job once: a reply reported again adds nothing. */
  recordUsage(id: string, message: AssistantMessage): void {
    const usage = usageRow(message);
    const columns = Object.keys(usage).map((column) => `${column} = ?`).join(", ");
    this.sql.exec(`UPDATE model_jobs SET ${columns} WHERE id = ? AND model IS NULL`, ...Object.values(usage), id);
  }

  /**
   * The job's provider asked it to wait until `limit.until` (a rate limit): it
   * waits, unless that is past `patienceMs` since its first wait, when it fails.
   * The person is told once per turn that the model is busy and when it will
   * be tried again.
   */
  rateLimited(job: JobRow, limit: { until: number; error: string }, patienceMs: number, now = Date.now()): { wait: number; tell?: string } | { fail: string } {
    const { until } = limit;
    const since = job.limited_since ?? now;
    if (job.limited_since === null) this.sql.exec("UPDATE model_jobs SET limited_since = ? WHERE id = ?", since, job.id);
    if (until > since + patienceMs) {
      return {
        fail: `the model provider is rate limiting the key this agent uses (${limit.error}) and asked us to wait until ${clockTime(until)}, past the ${patienceMs / 1000} s a turn waits (MODEL_RATE_LIMIT_PATIENCE_SECONDS; waited ${Math.round((now - since) / 1000)} s). Please try again later.`,
      };
    }
    const told = this.sql.exec("SELECT 1 FROM model_jobs WHERE conversation = ? AND turn = ? AND busy_told = 1 LIMIT 1", job.conversation, job.turn).toArray().length > 0;
    if (told) return { wait: until };
    this.sql.exec("UPDATE model_jobs SET busy_told = 1 WHERE id = ?", job.id);
    return { wait: until, tell: `The model is busy: its provider asked us to wait (a rate limit). I will try again at ${clockTime(until)} (in ${Math.max(1, Math.ceil((until - now) / 1000))} s).` };
  }

  /** Removes a settled job's large request; cleanup only, so a failure is logged, never thrown. */
  async dropLargeRequest(job: JobRow): Promise<void> {
    if (job.large_key) await this.largeValues.delete(job.large_key).catch((err) => console.warn(`could not delete ${job.large_key}`, err));
  }

  /** An interrupted turn's open jobs: a late reply for them is dropped. */
  discardOpen(conversation: string): void {
    this.sql.exec("UPDATE model_jobs SET status = 'discarded', settled_at = ? WHERE conversation = ? AND status = 'pending'", Date.now(), conversation);
    this.effects.dropConversation("model", conversation);
  }

  prune(): void {
    this.sql.exec("DELETE FROM model_jobs WHERE status != 'pending' AND settled_at < ?", Date.now() - KEEP_SETTLED_MS);
  }
}

/** A time of day as the chat shows it: UTC, to the second. */
function clockTime(ms: number): string {
  return `${new Date(ms).toISOString().slice(11, 19)} UTC`;
}

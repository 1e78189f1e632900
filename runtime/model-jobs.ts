// The model-job store: a job row is written before it is dispatched, its
// request kept in SQLite (or in R2 when it is too large for a row), and settled
// once by the first delivery of its outcome; later deliveries change nothing.
import type { AssistantMessage } from "@mariozechner/pi-ai";
import type { Route } from "./chat.ts";
import type { ModelJobMessage, ModelOutcome, ModelRequest } from "./model-job.ts";

/** Requests larger than this go to R2; SQLite rows are capped at 2 MB. */
export const LARGE_REQUEST_BYTES = 1 << 20;
/** How long an undispatched job waits before the alarm sends it again. */
const REDISPATCH_MS = 5_000;

export type JobPurpose = "chat" | "compact";

export type JobRow = {
  id: string;
  conversation: string;
  turn: number;
  purpose: JobPurpose;
  status: "pending" | "done" | "discarded" | "failed";
  request: string | null;
  large_key: string | null;
  dispatched: number;
};

/** What a settled job means for its turn. */
export type Settled =
  | { kind: "reply"; message: AssistantMessage }
  | { kind: "failed"; error: string };

export class ModelJobs {
  private readonly sql: SqlStorage;

  constructor(
    storage: DurableObjectStorage,
    private readonly objectId: string,
    private readonly largeValues: R2Bucket,
  ) {
    this.sql = storage.sql;
  }

  get(id: string): JobRow | undefined {
    return this.sql.exec<JobRow>("SELECT * FROM model_jobs WHERE id = ?", id).toArray()[0];
  }

  /** True while the conversation waits for the model. */
  isOpen(conversation: string): boolean {
    return this.sql.exec("SELECT 1 FROM model_jobs WHERE conversation = ? AND status = 'pending' LIMIT 1", conversation).toArray().length > 0;
  }

  openCount(): number {
    return this.sql.exec<{ n: number }>("SELECT COUNT(*) AS n FROM model_jobs WHERE status = 'pending'").one().n;
  }

  /**
   * Stores a request to the R2 bucket first when it is too large for a row.
   * Returns the large-value key (null when the request fits in the row).
   */
  async spill(conversation: string, turn: number, purpose: JobPurpose, body: string): Promise<string | null> {
    if (new TextEncoder().encode(body).byteLength <= LARGE_REQUEST_BYTES) return null;
    const key = `model-requests/${this.objectId}/${encodeURIComponent(this.nextId(conversation, turn, purpose))}`;
    await this.largeValues.put(key, body);
    return key;
  }

  /** Writes the job row: `body` is the serialised request, unless it was spilled to `largeKey`. */
  create(conversation: string, turn: number, purpose: JobPurpose, body: string, largeKey: string | null): void {
    this.sql.exec(
      "INSERT INTO model_jobs (id, conversation, turn, purpose, status, request, large_key, dispatched, created_at) VALUES (?, ?, ?, ?, 'pending', ?, ?, 0, ?)",
      this.nextId(conversation, turn, purpose),
      conversation,
      turn,
      purpose,
      largeKey ? null : body,
      largeKey,
      Date.now(),
    );
  }

  private nextId(conversation: string, turn: number, purpose: JobPurpose): string {
    const seq = this.sql.exec<{ n: number }>("SELECT COUNT(*) AS n FROM model_jobs WHERE conversation = ? AND turn = ?", conversation, turn).one().n;
    return `${conversation}:${turn}:${seq}:${purpose}`;
  }

  /** The request of a pending job; null when it is no longer wanted, or lost (`lost` then says so). */
  async request(job: JobRow): Promise<{ request: ModelRequest } | { lost: true } | null> {
    if (job.status !== "pending") return null;
    if (!job.large_key) return { request: JSON.parse(job.request ?? "null") as ModelRequest };
    const object = await this.largeValues.get(job.large_key);
    return object ? { request: (await object.json()) as ModelRequest } : { lost: true };
  }

  /** Settles a pending job with its outcome (once); the caller decides what it means for the turn. */
  settle(job: JobRow, outcome: ModelOutcome): Settled {
    const failed = !outcome.ok || outcome.message.stopReason === "error" || outcome.message.stopReason === "aborted";
    this.sql.exec("UPDATE model_jobs SET status = ?, settled_at = ?, request = NULL WHERE id = ?", failed ? "failed" : "done", Date.now(), job.id);
    if (!outcome.ok) return { kind: "failed", error: outcome.error };
    if (failed) return { kind: "failed", error: outcome.message.errorMessage ?? `the model stopped with "${outcome.message.stopReason}"` };
    return { kind: "reply", message: outcome.message };
  }

  /** Removes a settled job's large request; cleanup only, so a failure is logged, never thrown. */
  async dropLargeRequest(job: JobRow): Promise<void> {
    if (job.large_key) await this.largeValues.delete(job.large_key).catch((err) => console.warn(`could not delete ${job.large_key}`, err));
  }

  /** An interrupted turn's open jobs: a late reply for them is dropped. */
  discardOpen(conversation: string): void {
    this.sql.exec("UPDATE model_jobs SET status = 'discarded', settled_at = ? WHERE conversation = ? AND status = 'pending'", Date.now(), conversation);
  }

  /** Sends every pending job not yet on the queue; one that fails to send is tried again by the alarm. */
  async dispatch(queue: Queue, route: Route): Promise<void> {
    const jobs = this.sql.exec<JobRow>("SELECT * FROM model_jobs WHERE status = 'pending' AND dispatched = 0").toArray();
    for (const job of jobs) {
      const message: ModelJobMessage = { ...route, jobId: job.id };
      try {
        await queue.send(message);
      } catch (err) {
        console.error(`dispatch of ${job.id} failed; the alarm will retry`, err);
        continue;
      }
      this.sql.exec("UPDATE model_jobs SET dispatched = 1 WHERE id = ?", job.id);
    }
  }

  /** When the alarm must next look at jobs: only while one is waiting to be sent. */
  nextDue(): number | null {
    const undispatched = this.sql.exec("SELECT 1 FROM model_jobs WHERE status = 'pending' AND dispatched = 0 LIMIT 1").toArray().length > 0;
    return undispatched ? Date.now() + REDISPATCH_MS : null;
  }
}

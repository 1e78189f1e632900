// The model jobs table in the agent object's SQLite. The object's migration
// list (runtime/object/schema.ts) runs it in its order; only this room queries
// it (test/node/table-owners.test.mjs), and a released statement is never
// edited (docs/design.md, "Migrations").

/** One row per model call of a turn (runtime/models/jobs.ts). */
export const MODEL_JOBS_TABLE = `
  CREATE TABLE model_jobs (
    id TEXT PRIMARY KEY,
    conversation TEXT NOT NULL,
    turn INTEGER NOT NULL,
    purpose TEXT NOT NULL,
    status TEXT NOT NULL,
    request TEXT,
    large_key TEXT,
    error TEXT,
    created_at INTEGER NOT NULL,
    settled_at INTEGER,
    -- What the call used (runtime/metering/usage.ts), set when its reply arrives.
    model TEXT,
    input_tokens INTEGER NOT NULL DEFAULT 0,
    cache_read_tokens INTEGER NOT NULL DEFAULT 0,
    cache_write_tokens INTEGER NOT NULL DEFAULT 0,
    output_tokens INTEGER NOT NULL DEFAULT 0,
    cost REAL NOT NULL DEFAULT 0
  );
  CREATE INDEX model_jobs_by_conversation ON model_jobs (conversation, status);
  CREATE INDEX model_jobs_settled ON model_jobs (settled_at) WHERE status != 'pending';
`;

/** A job waiting out its provider's rate limit: since when, and whether its turn told the person. */
export const MODEL_JOBS_RATE_LIMITS = `
  ALTER TABLE model_jobs ADD COLUMN limited_since INTEGER;
  ALTER TABLE model_jobs ADD COLUMN busy_told INTEGER NOT NULL DEFAULT 0;
`;

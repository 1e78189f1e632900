// The feed's and the Responses API's tables in the agent object's SQLite. The
// object's migration list (runtime/object/schema.ts) runs them in its order;
// only this room queries them (test/node/table-owners.test.mjs), and a
// released statement is never edited (docs/design.md, "Migrations").

/**
 * What a follower of a conversation sees, in order (runtime/feed/feed.ts): one
 * row per log row and per state a hold enters, written by triggers on those
 * tables (the store's log, approvals' holds) in the transaction that writes
 * what it reports, so its seq is a durable, monotonic event id. UNIQUE keeps
 * a row put back from an archive (runtime/store/archive.ts) from being
 * reported twice. responses: the OpenAI Responses API's calls
 * (runtime/feed/responses.ts), each waiting for one turn.
 */
export const FEED_AND_RESPONSES_TABLES = `
  CREATE TABLE feed (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    conversation TEXT NOT NULL,
    log_seq INTEGER UNIQUE,
    hold_id TEXT,
    hold_state TEXT,
    UNIQUE (hold_id, hold_state)
  );
  CREATE INDEX feed_by_conversation ON feed (conversation, seq);
  CREATE TRIGGER feed_log AFTER INSERT ON log BEGIN
    INSERT OR IGNORE INTO feed (conversation, log_seq) VALUES (NEW.conversation, NEW.seq);
  END;
  CREATE TRIGGER feed_hold AFTER INSERT ON holds BEGIN
    INSERT OR IGNORE INTO feed (conversation, hold_id, hold_state) VALUES (NEW.conversation, NEW.id, NEW.status);
  END;
  CREATE TRIGGER feed_hold_state AFTER UPDATE OF status ON holds WHEN NEW.status != OLD.status BEGIN
    INSERT OR IGNORE INTO feed (conversation, hold_id, hold_state) VALUES (NEW.conversation, NEW.id, NEW.status);
  END;
  CREATE TABLE responses (
    id TEXT PRIMARY KEY,
    conversation TEXT NOT NULL,
    turn INTEGER NOT NULL,
    after_seq INTEGER NOT NULL,
    request TEXT NOT NULL,
    created_at INTEGER NOT NULL
  );
`;

/** The caller's function tools of a turn are read by (conversation, turn) at each model call and tool step (Responses.functionsOf). */
export const RESPONSES_BY_TURN = `
  CREATE INDEX responses_by_turn ON responses (conversation, turn);
`;

// One page of the agent's conversations, newest first, searched by id or by
// the words of their messages: the store's part of what the console lists
// (runtime/object/views.ts adds what other rooms know of each).
import type { ConversationRow } from "./conversations.ts";

/** Where the next page starts: the last row of this one (updated_at, then id, both descending). */
export interface PageCursor {
  updatedAt: number;
  id: string;
}

export interface ConversationQuery {
  /** Matches the conversation id or the text of its messages (case-insensitive for ASCII). */
  search?: string;
  after?: PageCursor;
  limit: number;
}

/** A conversation of the page, with its first message's log data (null before it has one). */
export type PageRow = ConversationRow & { first_message: string | null };

/** Log rows whose data holds words a person or the agent wrote. */
const TEXT_ROWS = "('user', 'assistant', 'tool_result')";

/** LIKE with the user's text taken literally. */
function likePattern(text: string): string {
  return `%${text.replace(/[\\%_]/g, (ch) => `\\${ch}`)}%`;
}

export function conversationRows(sql: SqlStorage, query: ConversationQuery): { rows: PageRow[]; next?: PageCursor } {
  const where: string[] = [];
  const args: SqlStorageValue[] = [];
  if (query.search) {
    // Message rows are JSON; the pattern is matched against it, which is close enough for finding a conversation.
    where.push(`(c.id LIKE ? ESCAPE '\\' OR EXISTS (SELECT 1 FROM log l WHERE l.conversation = c.id AND l.type IN ${TEXT_ROWS} AND l.data LIKE ? ESCAPE '\\'))`);
    args.push(likePattern(query.search), likePattern(query.search));
  }
  if (query.after) {
    where.push("(c.updated_at < ? OR (c.updated_at = ? AND c.id < ?))");
    args.push(query.after.updatedAt, query.after.updatedAt, query.after.id);
  }
  const rows = sql
    .exec<PageRow>(
      `SELECT c.*,
        (SELECT l.data FROM log l WHERE l.conversation = c.id AND l.type = 'user' ORDER BY l.seq LIMIT 1) AS first_message
      FROM conversations c ${where.length ? `WHERE ${where.join(" AND ")}` : ""}
      ORDER BY c.updated_at DESC, c.id DESC LIMIT ?`,
      ...args,
      query.limit + 1,
    )
    .toArray();
  const shown = rows.slice(0, query.limit);
  const last = shown.at(-1);
  return { rows: shown, next: rows.length > query.limit && last ? { updatedAt: last.updated_at, id: last.id } : undefined };
}

/** Changes whenever a log row is written: the store's part of a watcher's change mark (runtime/object/views.ts). */
export function logMark(sql: SqlStorage, conversation?: string): string {
  const and = conversation === undefined ? "" : " AND conversation = ?";
  return String(sql.exec<{ v: SqlStorageValue }>(`SELECT MAX(seq) AS v FROM log WHERE 1${and}`, ...(conversation === undefined ? [] : [conversation])).one().v ?? "");
}

// A table whose rows each belong to one conversation (its `conversation`
// column), as retention moves them whole (runtime/store/archive.ts): read,
// counted, deleted and put back. The room that owns the table makes one for
// it, naming it; retention runs it without knowing whose it is.

export type StoredRow = Record<string, SqlStorageValue>;

export class ConversationRows<Table extends string = string> {
  constructor(
    private readonly sql: SqlStorage,
    readonly table: Table,
  ) {}

  of(conversation: string): StoredRow[] {
    return this.sql.exec<StoredRow>(`SELECT * FROM ${this.table} WHERE conversation = ?`, conversation).toArray();
  }

  count(conversation: string): number {
    return this.sql.exec<{ n: number }>(`SELECT COUNT(*) AS n FROM ${this.table} WHERE conversation = ?`, conversation).one().n;
  }

  remove(conversation: string): void {
    this.sql.exec(`DELETE FROM ${this.table} WHERE conversation = ?`, conversation);
  }

  /** A row as `of` read it, from `source` (an archive in R2): its column names are checked first, as they come from outside. */
  putBack(row: StoredRow, source: string): void {
    const columns = Object.keys(row);
    if (!columns.every((name) => /^[a-z_]+$/.test(name))) throw new Error(`${source} names a column that is not one`);
    this.sql.exec(`INSERT INTO ${this.table} (${columns.join(", ")}) VALUES (${columns.map(() => "?").join(", ")})`, ...Object.values(row));
  }
}

// The people directory: a person's identity (`slack:<team>:<user>`,
// `discord:<guild>:<user>`) and the name they go by, so the console shows
// names, not ids. Written when someone signs in to the console and from chat
// payloads that carry a name; a name is only ever replaced by a newer one.

export const PEOPLE_SCHEMA = "CREATE TABLE people (identity TEXT PRIMARY KEY, name TEXT NOT NULL, updated_at INTEGER NOT NULL)";

/** A name is for showing: cut to this many characters. */
const NAME_CHARS = 100;

export type PersonName = { identity: string; name: string };

/** Keeps each person's name; a row is written only when the name changed. */
export function rememberNames(sql: SqlStorage, people: PersonName[], now: number): void {
  for (const { identity, name } of people) {
    const shown = name.trim().slice(0, NAME_CHARS);
    if (shown === "") continue;
    sql.exec(
      "INSERT INTO people (identity, name, updated_at) VALUES (?, ?, ?) ON CONFLICT (identity) DO UPDATE SET name = excluded.name, updated_at = excluded.updated_at WHERE people.name <> excluded.name",
      identity,
      shown,
      now,
    );
  }
}

/** The names known for these identities (one bound parameter, however many). */
export function namesOf(sql: SqlStorage, identities: string[]): Record<string, string> {
  const rows = sql.exec<PersonName>("SELECT identity, name FROM people WHERE identity IN (SELECT value FROM json_each(?))", JSON.stringify(identities)).toArray();
  return Object.fromEntries(rows.map((r) => [r.identity, r.name]));
}

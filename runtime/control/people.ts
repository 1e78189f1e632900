// The people directory as releases before this one kept it in the control
// plane: a person's identity (`slack:<team>:<user>`, `discord:<guild>:<user>`)
// and the name they go by. Each name now lives in the object of the tenant
// its identity's team or guild names (tenant-access.ts); that object takes
// its people's rows over at its first touch, read here, then deleted here.
import type { PersonName } from "./tenant-access.ts";

export const PEOPLE_SCHEMA = "CREATE TABLE people (identity TEXT PRIMARY KEY, name TEXT NOT NULL, updated_at INTEGER NOT NULL)";

/** The identities of a team or guild start so, on either platform. */
const prefixes = (team: string) => [`slack:${team}:`, `discord:${team}:`];

const OF_TEAM = "substr(identity, 1, length(?)) = ? OR substr(identity, 1, length(?)) = ?";
const teamArgs = (team: string) => prefixes(team).flatMap((prefix) => [prefix, prefix]);

/** The names kept here of the people whose identity names this team or guild. */
export function peopleOfTeam(sql: SqlStorage, team: string): (PersonName & { updatedAt: number })[] {
  return sql.exec<PersonName & { updatedAt: number }>(`SELECT identity, name, updated_at AS updatedAt FROM people WHERE ${OF_TEAM}`, ...teamArgs(team)).toArray();
}

export function clearPeopleOfTeam(sql: SqlStorage, team: string): void {
  sql.exec(`DELETE FROM people WHERE ${OF_TEAM}`, ...teamArgs(team));
}

// Per-mount plugin session state (a cookie, a cursor, the memory plugin's
// notes), kept in the agent's SQLite so it survives evictions and deploys. A
// courier gets a copy with a call and hands it back with the result.
import { ownValue } from "../../lib/own-value.ts";
import type { SessionState } from "../../plugins/index.ts";

export class MountSessions {
  constructor(private readonly sql: SqlStorage) {}

  state(alias: string): SessionState {
    return {
      get: <T>(key: string) => {
        const row = this.sql.exec<{ value: string }>("SELECT value FROM mount_sessions WHERE alias = ? AND key = ?", alias, key).toArray()[0];
        return row ? (JSON.parse(row.value) as T) : undefined;
      },
      set: (key, value) => {
        this.sql.exec("INSERT OR REPLACE INTO mount_sessions (alias, key, value) VALUES (?, ?, ?)", alias, key, JSON.stringify(value));
      },
    };
  }

  snapshot(alias: string): Record<string, unknown> {
    const rows = this.sql.exec<{ key: string; value: string }>("SELECT key, value FROM mount_sessions WHERE alias = ?", alias).toArray();
    return Object.fromEntries(rows.map((row) => [row.key, JSON.parse(row.value)]));
  }

  /** Writes back what a courier returned: keys it set are stored (none is removed). */
  replace(alias: string, values: Record<string, unknown>): void {
    const state = this.state(alias);
    for (const [key, value] of Object.entries(values)) state.set(key, value);
  }
}

/** A courier's copy of a mount's session state: it hands back only the keys it set, so a report never undoes another's. */
export function sessionCopy(snapshot: Record<string, unknown>): { state: SessionState; changed(): Record<string, unknown> } {
  const values = { ...snapshot };
  const changed: Record<string, unknown> = {};
  return {
    state: {
      get: <T>(key: string) => ownValue(values, key) as T | undefined,
      set: (key, value) => {
        values[key] = value;
        changed[key] = value;
      },
    },
    changed: () => changed,
  };
}

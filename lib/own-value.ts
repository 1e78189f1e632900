// Lookups keyed by outside input (a tenant, a user id, a note's key) read only
// a record's own entries: "constructor" or "toString" must not find Object's.

/** The record's own value for `key`, never one inherited from Object.prototype. */
export function ownValue<T>(record: Readonly<Record<string, T>>, key: string): T | undefined {
  return Object.hasOwn(record, key) ? record[key] : undefined;
}

// Scoped API keys: `apk_<id>_<tenant>_<secret>`, shown once when made, where
// <tenant> is the tenant's name in unpadded base64url (a name may hold any
// character) and <secret> 32 random bytes the same way (43 characters). The
// key names its tenant, so the Worker checks it in that tenant's own object
// and asks no deployment-wide one. Only the SHA-256 of the whole key is kept,
// so a copy of the rows opens nothing, and a key whose tenant part is changed
// is another key, unknown to the tenant it now names.
//
// A key made by a release before this one is `apk_<id>_<secret>`: the same
// without its tenant, and so exactly OLD_KEY_LENGTH characters; the control
// plane says which tenant's it is (runtime/control/access-tables.ts, old_keys).
import { fromBase64Url, toBase64Url } from "../../lib/base64.ts";
import { sha256Hex } from "../../lib/http.ts";

export const KEY_PREFIX = "apk_";

export const hashKey = sha256Hex;

/** The secret's characters: 32 bytes, unpadded base64url. */
const SECRET_CHARS = 43;
/** `k` and 12 hex digits. */
const ID_CHARS = 13;
/** An old key: prefix, id, `_`, secret. */
const OLD_KEY_LENGTH = KEY_PREFIX.length + ID_CHARS + 1 + SECRET_CHARS;

/**
 * A new key of the tenant: its id (public, names it in lists and the audit
 * trail), the key itself, and its hash. `from` names the id instead of
 * chance: the same form sent twice asks for the same id, and the second is refused.
 */
export async function mintKey(tenant: string, from?: string): Promise<{ id: string; key: string; hash: string }> {
  const id = `k${(from === undefined ? crypto.randomUUID().replaceAll("-", "") : await sha256Hex(from)).slice(0, 12)}`;
  const named = toBase64Url(new TextEncoder().encode(tenant));
  const key = `${KEY_PREFIX}${id}_${named}_${toBase64Url(crypto.getRandomValues(new Uint8Array(32)))}`;
  return { id, key, hash: await hashKey(key) };
}

/**
 * The tenant a key names: a string for a key this release made, null for an
 * old key (which names none), undefined for text that is no key of either
 * shape (nothing need be asked: it is refused).
 */
export function keyTenant(key: string): string | null | undefined {
  if (!key.startsWith(KEY_PREFIX) || !/^k[0-9a-f]{12}_$/.test(key.slice(KEY_PREFIX.length, KEY_PREFIX.length + ID_CHARS + 1))) return undefined;
  if (key.length === OLD_KEY_LENGTH) return null;
  // `_<tenant>` sits between the id's `_` and the secret's, counted from each end: the base64url of a name may hold `_` itself.
  const start = KEY_PREFIX.length + ID_CHARS + 1;
  const end = key.length - SECRET_CHARS - 1;
  if (end <= start || key[end] !== "_") return undefined;
  const named = key.slice(start, end);
  if (!/^[A-Za-z0-9_-]+$/.test(named) || named.length % 4 === 1) return undefined;
  try {
    const tenant = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true }).decode(fromBase64Url(named));
    // Only the one spelling toBase64Url makes: another would be another key naming the same tenant.
    return toBase64Url(new TextEncoder().encode(tenant)) === named ? tenant : undefined;
  } catch {
    return undefined;
  }
}

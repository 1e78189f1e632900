// Scoped API keys: `apk_<id>_<secret>`, shown once when made; the control
// plane keeps only the SHA-256 of the whole key, so a copy of its rows opens nothing.
import { toBase64Url } from "../../lib/base64.ts";
import { sha256Hex } from "../../lib/http.ts";

export const KEY_PREFIX = "apk_";

export const hashKey = sha256Hex;

/**
 * A new key: its id (public, names it in lists and the audit trail), the key
 * itself, and its hash. `from` names the id instead of chance: the same form
 * sent twice asks for the same id, and the second is refused.
 */
export async function mintKey(from?: string): Promise<{ id: string; key: string; hash: string }> {
  const id = `k${(from === undefined ? crypto.randomUUID().replaceAll("-", "") : await sha256Hex(from)).slice(0, 12)}`;
  const key = `${KEY_PREFIX}${id}_${toBase64Url(crypto.getRandomValues(new Uint8Array(32)))}`;
  return { id, key, hash: await hashKey(key) };
}

// Values sealed at rest (a workspace's bot token, a tenant's secret): AES-GCM
// under a key derived (HKDF) from a Worker secret and a purpose, with data it
// is bound to (its tenant, its name) authenticated, so a sealed value copied
// to another row does not open.
import { fromBase64, toBase64 } from "./base64.ts";

export interface Sealed {
  /** base64 of the 12-byte IV. */
  iv: string;
  /** base64 of the ciphertext. */
  sealed: string;
}

const encoder = new TextEncoder();

async function keyFor(secret: string, purpose: string): Promise<CryptoKey> {
  const material = await crypto.subtle.importKey("raw", encoder.encode(secret), "HKDF", false, ["deriveKey"]);
  return crypto.subtle.deriveKey({ name: "HKDF", hash: "SHA-256", salt: new Uint8Array(), info: encoder.encode(purpose) }, material, { name: "AES-GCM", length: 256 }, false, ["encrypt", "decrypt"]);
}

export async function seal(secret: string, purpose: string, boundTo: string, plain: string): Promise<Sealed> {
  const iv = crypto.getRandomValues(new Uint8Array(12));
  const sealed = await crypto.subtle.encrypt({ name: "AES-GCM", iv, additionalData: encoder.encode(boundTo) }, await keyFor(secret, purpose), encoder.encode(plain));
  return { iv: toBase64(iv), sealed: toBase64(new Uint8Array(sealed)) };
}

/** Throws when the key, the purpose or `boundTo` is not the one it was sealed with. */
export async function open(secret: string, purpose: string, boundTo: string, stored: Sealed): Promise<string> {
  const plain = await crypto.subtle.decrypt({ name: "AES-GCM", iv: fromBase64(stored.iv), additionalData: encoder.encode(boundTo) }, await keyFor(secret, purpose), fromBase64(stored.sealed));
  return new TextDecoder().decode(plain);
}

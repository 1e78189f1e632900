// Base64 of bytes, and the bytes a base64 text holds, for the places that
// carry binary as text (images, sealed tokens, redaction's encodings).

/** In chunks: a spread of a large array into String.fromCharCode overflows the stack. */
export function toBase64(bytes: Uint8Array): string {
  let text = "";
  for (let i = 0; i < bytes.length; i += 0x8000) text += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(text);
}

/** The URL- and cookie-safe alphabet, unpadded: random ids and keys. */
export function toBase64Url(bytes: Uint8Array): string {
  return toBase64(bytes).replaceAll("+", "-").replaceAll("/", "_").replace(/=+$/, "");
}

export function fromBase64(data: string): Uint8Array {
  return Uint8Array.from(atob(data), (c) => c.charCodeAt(0));
}

/** The bytes of toBase64Url's text (atob takes it unpadded). */
export function fromBase64Url(data: string): Uint8Array {
  return fromBase64(data.replaceAll("-", "+").replaceAll("_", "/"));
}

/** How many bytes a base64 text holds, without decoding it. */
export function base64Bytes(data: string): number {
  return Math.floor((data.replace(/=+$/, "").length * 3) / 4);
}

// Pictures' bytes, stored once per agent in R2 under their sha256: the
// transcript, the job rows and the queue carry only the reference (a
// StoredImage), and the courier reads the bytes back right before the call.
import type { ImageContent } from "@mariozechner/pi-ai";
import type { Route } from "../chat.ts";
import { sha256Hex } from "../../lib/http.ts";

/**
 * An image part as the transcript and the job rows keep it: pi-ai's
 * ImageContent whose `data` stays empty until the courier reads its bytes
 * back (`ref`: their sha256; `bytes`: their count, for the request's budget).
 */
export type StoredImage = ImageContent & { ref: string; bytes: number };

export function isStoredImage(part: { type: string }): part is StoredImage {
  return part.type === "image" && typeof (part as Partial<StoredImage>).ref === "string";
}

/** Where an agent's image lives in LARGE_VALUES. */
export function imageKey(route: Route, sha256: string): string {
  return `images/${[route.tenant, route.agent].map(encodeURIComponent).join("/")}/${sha256}`;
}

/** Stores the bytes unless the agent has them already (the same picture shared twice is kept once); the part that refers to them. */
export async function storeImage(bucket: R2Bucket, route: Route, bytes: Uint8Array, mimeType: string): Promise<StoredImage> {
  const ref = await sha256Hex(bytes);
  const key = imageKey(route, ref);
  if (!(await bucket.head(key))) await bucket.put(key, bytes, { httpMetadata: { contentType: mimeType } });
  return { type: "image", data: "", mimeType, ref, bytes: bytes.length };
}


// The pictures of one model request, read back by the courier right before
// the call. Only the newest MODEL_IMAGES_MAX images (and MODEL_IMAGES_MAX_BYTES
// of them) go; older ones leave the window several at a time, so the request's
// prefix (what a provider's prompt cache holds) changes only when it moves.
// Every image that does not go is replaced by a sentence saying why.
import type { ImageContent, Message, TextContent } from "@mariozechner/pi-ai";
import type { Route } from "../chat.ts";
import type { ImageLimits } from "./config.ts";
import { base64Bytes, toBase64 } from "../../lib/base64.ts";
import { imageKey, isStoredImage } from "./pictures.ts";

type Part = TextContent | ImageContent;

const sizeText = (bytes: number) => (bytes >= 1048576 ? `${Math.round((bytes / 1048576) * 10) / 10} MiB` : `${Math.round(bytes / 1024)} KiB`);

/** An image's bytes: counted when stored, or from its base64 (one kept inline by an earlier release). */
function sizeOf(image: ImageContent): number {
  return isStoredImage(image) ? image.bytes : base64Bytes(image.data);
}

/**
 * How many of the oldest images are left out: a multiple of half the count
 * limit, the fewest that leave the rest within both limits (or all but the
 * newest, which always fits: larger ones are never shown). Images only ever
 * join at the end, so this never shrinks as a conversation grows.
 */
export function leftOut(sizes: readonly number[], limits: ImageLimits): number {
  if (sizes.length === 0) return 0;
  const step = Math.ceil(limits.count / 2);
  const fits = (from: number) => sizes.length - from <= limits.count && sizes.slice(from).reduce((a, b) => a + b, 0) <= limits.bytes;
  let from = 0;
  while (!fits(from) && from < sizes.length - 1) from += step;
  return Math.min(from, sizes.length - 1);
}

/**
 * The messages as the provider is to get them: each image in the window with
 * its bytes (read from R2 under the agent), every other one a sentence. A
 * model that cannot see images (`sees` false, the model table's `images`) is
 * told so in place of each.
 */
export async function picturesIn(bucket: R2Bucket, route: Route, sees: boolean, limits: ImageLimits, messages: Message[]): Promise<Message[]> {
  const images = messages.flatMap((m) => (m.role === "assistant" || typeof m.content === "string" ? [] : m.content.filter((p): p is ImageContent => p.type === "image")));
  if (images.length === 0) return messages;
  const sized = images.map((image) => ({ image, bytes: sizeOf(image) }));
  const windowed = sized.filter((s) => s.bytes <= limits.bytes);
  const from = leftOut(windowed.map((s) => s.bytes), limits);
  const shown = new Set(sees ? windowed.slice(from).map((s) => s.image) : []);
  const read = new Map(
    await Promise.all(
      [...shown].filter(isStoredImage).map(async (image) => {
        const object = await bucket.get(imageKey(route, image.ref));
        return [image, object && toBase64(new Uint8Array(await object.arrayBuffer()))] as const;
      }),
    ),
  );
  const replaced = (part: Part): Part => {
    if (part.type !== "image") return part;
    const note = (why: string): Part => ({ type: "text", text: `(image not shown: ${why})` });
    if (!sees) return note("this model cannot see images");
    if (sizeOf(part) > limits.bytes) return note(`larger than the ${sizeText(limits.bytes)} of images a request carries`);
    if (!shown.has(part)) return note(`only the newest ${limits.count} images, at most ${sizeText(limits.bytes)}, reach the model`);
    if (!isStoredImage(part)) return part;
    const data = read.get(part);
    return data ? { type: "image", mimeType: part.mimeType, data } : note("its stored copy is gone");
  };
  return messages.map((m) => (m.role === "assistant" || typeof m.content === "string" ? m : ({ ...m, content: m.content.map(replaced) } as Message)));
}

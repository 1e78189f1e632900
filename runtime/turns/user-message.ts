// A person's message as the model reads it: their words and the files they shared.
import type { ImageContent, UserMessage } from "@mariozechner/pi-ai";
import type { Attachment } from "../chat.ts";
import type { StoredImage } from "../store/index.ts";

/** The person's words, then each shared file: its text, or the image itself after its name, or its name and why it is not shown. */
export function userMessage(text: string, attachments: Attachment[] = []): UserMessage {
  if (attachments.length === 0) return { role: "user", content: text, timestamp: Date.now() };
  const content: UserMessage["content"] = text ? [{ type: "text", text }] : [];
  const say = (line: string) => content.push({ type: "text", text: content.length > 0 ? `\n\n${line}` : line });
  for (const file of attachments) {
    const label = `${file.name} (${file.mimeType}, ${file.bytes} bytes)`;
    if (file.kind === "text") say(`<file name="${file.name}" type="${file.mimeType}">\n${file.text}\n</file>`);
    if (file.kind === "named") say(`[file ${label}, not shown: ${file.note}]`);
    if (file.kind === "image") {
      say(`[image ${label}]`);
      // Its bytes stay in R2 (the courier reads them back); an event accepted before they went there still carries them.
      const image: StoredImage | ImageContent = file.data === undefined ? { type: "image", data: "", mimeType: file.mimeType, ref: file.ref, bytes: file.bytes } : { type: "image", data: file.data, mimeType: file.mimeType };
      content.push(image);
    }
  }
  return { role: "user", content, timestamp: Date.now() };
}

// Files shared with a chat message, fetched by the bridge before the event is
// accepted: the object never waits on the network, and a platform wants its
// answer within seconds (Slack 3 s), so every fetch has a size cap and all of
// them one deadline. Text becomes text for the model, an image an image (for
// models that take images; pi-ai names it to the others), anything else is
// named with why. Each bridge says which links it trusts and how to fetch them.
import { toBase64 } from "../../lib/base64.ts";
import { readAtMost } from "../../lib/http.ts";
import type { Attachment } from "../../runtime/index.ts";

/** About 64k tokens: a larger text would crowd the conversation out of most context windows. */
export const TEXT_MAX_BYTES = 256 * 1024;
/** Larger than providers take without scaling it down (Claude ~1.15 megapixels). */
export const IMAGE_MAX_BYTES = 1024 * 1024;
/** What one message's files may add up to (an image as its base64, as the event brings it to the edge, which stores it in R2): a text goes into the log row, which SQLite caps at 2 MB. */
const STORED_MAX_CHARS = 1_500_000;
/** All of a message's files, fetched side by side, within this: Slack retries an event not answered in 3 s, Discord's interactions want an answer in 3 s. */
export const FETCH_DEADLINE_MS = 2_000;

/** What providers take as image input. */
const IMAGE_TYPES = new Set(["image/png", "image/jpeg", "image/gif", "image/webp"]);
const TEXT_TYPES = new Set(["application/json", "application/xml", "application/javascript", "application/x-yaml", "application/yaml", "application/x-sh", "application/sql"]);

/** A file as a bridge read it from its platform's message: `url` only where the bridge trusts it (null: none to use). */
export interface SharedFile {
  name: string;
  mimeType: string;
  /** As the platform says. */
  bytes: number;
  url: URL | null;
}

/** Where the files come from: the platform's name (for the model's notes) and what a fetch carries (a bot token, for Slack). */
export interface FileSource {
  platform: string;
  headers?: Record<string, string>;
}

type Kind = "text" | "image";

function kindOf(mimeType: string): Kind | null {
  if (IMAGE_TYPES.has(mimeType)) return "image";
  if (mimeType.startsWith("text/") || TEXT_TYPES.has(mimeType) || /\+(json|xml)$/.test(mimeType)) return "text";
  return null;
}

/** A link a bridge may fetch: https on `hosts`, or the origin its API base points at (as tests do). */
export function trustedUrl(url: string | null | undefined, hosts: readonly string[], apiBase: string): URL | null {
  if (!url || !URL.canParse(url)) return null;
  const parsed = new URL(url);
  const ours = (parsed.protocol === "https:" && hosts.includes(parsed.hostname)) || parsed.origin === new URL(apiBase).origin;
  return ours ? parsed : null;
}

/** Each shared file as the model is to see it; never throws (a file that cannot be had is named, saying why). */
export async function fetchFiles(files: SharedFile[], source: FileSource): Promise<Attachment[]> {
  const signal = AbortSignal.timeout(FETCH_DEADLINE_MS);
  let room = STORED_MAX_CHARS;
  return Promise.all(
    files.map(({ name, mimeType, bytes, url }) => {
      const named = (note: string): Attachment => ({ name, mimeType, bytes, kind: "named", note });
      const kind = kindOf(mimeType);
      if (!kind) return named("a kind of file the agent cannot read");
      const max = kind === "text" ? TEXT_MAX_BYTES : IMAGE_MAX_BYTES;
      if (bytes > max) return named(`larger than the ${max / 1024} KiB the agent reads of ${kind === "text" ? "a text file" : "an image"}`);
      const stored = kind === "image" ? Math.ceil(bytes / 3) * 4 : bytes;
      if (stored > room) return named("the message's files together are more than the agent reads of one message");
      room -= stored;
      if (!url) return named(`${source.platform} gave no link to it that the agent may use`);
      return download(url, source.headers ?? {}, max, signal).then(
        (body) => (kind === "text" ? { name, mimeType, bytes: body.length, kind, text: new TextDecoder().decode(body) } : { name, mimeType, bytes: body.length, kind, data: toBase64(body) }),
        (err: unknown) => named(`it could not be fetched (${err instanceof Error ? err.message : String(err)})`),
      );
    }),
  );
}

/** The file's bytes, at most `max` of them (a file larger than Slack said is refused, not read whole). */
async function download(url: URL, headers: Record<string, string>, max: number, signal: AbortSignal): Promise<Uint8Array> {
  const res = await fetch(url, { headers, redirect: "manual", signal });
  if (res.status !== 200 || !res.body) {
    await res.body?.cancel();
    throw new Error(`HTTP ${res.status}`);
  }
  return readAtMost(res.body, max, () => new Error(`larger than ${max / 1024} KiB`));
}

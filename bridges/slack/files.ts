// Files shared with a message (`files[]` of a message event), fetched from
// their url_private with the workspace's bot token before the event is
// accepted: the object never waits on the network, and Slack wants its answer
// within 3 s, so every fetch has a size cap and all of them one deadline.
// Text becomes text for the model, an image an image (for models that take
// images; pi-ai names it to the others), anything else is named with why.
import { toBase64 } from "../../lib/base64.ts";
import { readAtMost } from "../../lib/http.ts";
import type { Attachment } from "../../runtime/index.ts";
import { apiBaseUrl } from "./config.ts";

/** About 64k tokens: a larger text would crowd the conversation out of most context windows. */
export const TEXT_MAX_BYTES = 256 * 1024;
/** Larger than providers take without scaling it down (Claude ~1.15 megapixels). */
export const IMAGE_MAX_BYTES = 1024 * 1024;
/** What one message's files may add up to (an image as its base64, as the event brings it to the edge, which stores it in R2): a text goes into the log row, which SQLite caps at 2 MB. */
const STORED_MAX_CHARS = 1_500_000;
/** All of a message's files, fetched side by side, within this: Slack retries an event not answered in 3 s. */
export const FETCH_DEADLINE_MS = 2_000;

/** What providers take as image input. */
const IMAGE_TYPES = new Set(["image/png", "image/jpeg", "image/gif", "image/webp"]);
const TEXT_TYPES = new Set(["application/json", "application/xml", "application/javascript", "application/x-yaml", "application/yaml", "application/x-sh", "application/sql"]);

/** The fields of a Slack file object that are read here. */
export interface SlackFile {
  name?: string | null;
  mimetype?: string | null;
  size?: number | null;
  url_private?: string | null;
}

type Kind = "text" | "image";

function kindOf(mimeType: string): Kind | null {
  if (IMAGE_TYPES.has(mimeType)) return "image";
  if (mimeType.startsWith("text/") || TEXT_TYPES.has(mimeType) || /\+(json|xml)$/.test(mimeType)) return "text";
  return null;
}

/** The bot token goes only to Slack's file host (or wherever SLACK_API_BASE_URL points, as tests do). */
function trustedFileUrl(env: Env, url: string | null | undefined): URL | null {
  if (!url || !URL.canParse(url)) return null;
  const parsed = new URL(url);
  const ours = (parsed.protocol === "https:" && parsed.hostname === "files.slack.com") || parsed.origin === new URL(apiBaseUrl(env)).origin;
  return ours ? parsed : null;
}

/** Each shared file as the model is to see it; never throws (a file that cannot be had is named, saying why). */
export async function fetchFiles(env: Env, token: string, files: SlackFile[]): Promise<Attachment[]> {
  const signal = AbortSignal.timeout(FETCH_DEADLINE_MS);
  let room = STORED_MAX_CHARS;
  return Promise.all(
    files.map((file) => {
      const name = file.name || "unnamed file";
      const mimeType = file.mimetype || "application/octet-stream";
      const bytes = file.size ?? 0;
      const named = (note: string): Attachment => ({ name, mimeType, bytes, kind: "named", note });
      const kind = kindOf(mimeType);
      if (!kind) return named("a kind of file the agent cannot read");
      const max = kind === "text" ? TEXT_MAX_BYTES : IMAGE_MAX_BYTES;
      if (bytes > max) return named(`larger than the ${max / 1024} KiB the agent reads of ${kind === "text" ? "a text file" : "an image"}`);
      const stored = kind === "image" ? Math.ceil(bytes / 3) * 4 : bytes;
      if (stored > room) return named("the message's files together are more than the agent reads of one message");
      room -= stored;
      const url = trustedFileUrl(env, file.url_private);
      if (!url) return named("Slack gave no link to it that the agent may use");
      return download(url, token, max, signal).then(
        (body) => (kind === "text" ? { name, mimeType, bytes: body.length, kind, text: new TextDecoder().decode(body) } : { name, mimeType, bytes: body.length, kind, data: toBase64(body) }),
        (err: unknown) => named(`it could not be fetched (${err instanceof Error ? err.message : String(err)})`),
      );
    }),
  );
}

/** The file's bytes, at most `max` of them (a file larger than Slack said is refused, not read whole). */
async function download(url: URL, token: string, max: number, signal: AbortSignal): Promise<Uint8Array> {
  const res = await fetch(url, { headers: { authorization: `Bearer ${token}` }, redirect: "manual", signal });
  if (res.status !== 200 || !res.body) {
    await res.body?.cancel();
    throw new Error(`HTTP ${res.status}`);
  }
  return readAtMost(res.body, max, () => new Error(`larger than ${max / 1024} KiB`));
}

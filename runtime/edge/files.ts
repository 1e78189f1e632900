// Files shared with a person's message, read before the event is accepted:
// the object never waits on the network. Text becomes text for the model, an
// image an image (for models that take images; pi-ai names it to the others).
// One set of kinds and caps for every way in. A chat's files (the bridges)
// are fetched from the links their platform gives, each under its cap and all
// within one deadline (Slack wants its answer within 3 s); one that cannot be
// had is named to the model with why, since a chat cannot be told no. A file
// given through an API or the console (the Agents API inline, the Responses
// API inline or by a link, the console's message form as an upload) is
// refused instead, with a 400 naming the cap it passed.
import { toBase64 } from "../../lib/base64.ts";
import { HttpError, readAtMost } from "../../lib/http.ts";
import type { Attachment } from "../chat.ts";

/** About 64k tokens: a larger text would crowd the conversation out of most context windows. */
export const TEXT_MAX_BYTES = 256 * 1024;
/** Larger than providers take without scaling it down (Claude ~1.15 megapixels). */
export const IMAGE_MAX_BYTES = 1024 * 1024;
/** What one message's files may add up to (an image as its base64, as the event brings it to the edge, which stores it in R2): a text goes into the log row, which SQLite caps at 2 MB. */
export const FILES_MAX_CHARS = 1_500_000;
/** A given file's name, which the transcript and the model's notes show. */
export const FILE_NAME_MAX_CHARS = 200;
/** How many files one message given through an API or the console may bring. */
export const FILES_MAX_COUNT = 10;
/** All of a message's files, fetched side by side, within this: Slack retries an event not answered in 3 s, Discord's interactions want an answer in 3 s. */
export const FETCH_DEADLINE_MS = 2_000;

/** What providers take as image input. */
export const IMAGE_TYPES: readonly string[] = ["image/png", "image/jpeg", "image/gif", "image/webp"];
const TEXT_TYPES = new Set(["application/json", "application/xml", "application/javascript", "application/x-yaml", "application/yaml", "application/x-sh", "application/sql"]);
/** The kinds read, in words, for a refusal. */
const KINDS_READ = "text (text/*, JSON, XML, YAML, code) or a picture (PNG, JPEG, GIF, WebP)";

/** The caps in words, for a form that takes files and a refusal of a body too large to read. */
export const FILE_CAPS = `at most ${FILES_MAX_COUNT} files: a picture (PNG, JPEG, GIF, WebP) of at most ${IMAGE_MAX_BYTES / 1024} KiB, a text file of at most ${TEXT_MAX_BYTES / 1024} KiB`;

/** A file's type by its name, for one given without a type (the Responses API's file_data as bare base64, a link served as octet-stream). */
const TYPE_OF_EXTENSION: Record<string, string> = {
  txt: "text/plain", md: "text/markdown", csv: "text/csv", tsv: "text/tab-separated-values", html: "text/html", css: "text/css",
  json: "application/json", xml: "application/xml", yaml: "application/yaml", yml: "application/yaml", js: "application/javascript",
  ts: "text/plain", py: "text/x-python", sh: "application/x-sh", sql: "application/sql",
  png: "image/png", jpg: "image/jpeg", jpeg: "image/jpeg", gif: "image/gif", webp: "image/webp",
};

/** What a file input offers to pick (a browser may still send another kind, which is refused by name). */
export const FILE_ACCEPT = [...IMAGE_TYPES, "text/*", ...TEXT_TYPES, ...Object.keys(TYPE_OF_EXTENSION).map((ext) => `.${ext}`)].join(",");

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
  if (IMAGE_TYPES.includes(mimeType)) return "image";
  if (mimeType.startsWith("text/") || TEXT_TYPES.has(mimeType) || /\+(json|xml)$/.test(mimeType)) return "text";
  return null;
}

/** Whether the agent reads a file of this type (as text or as a picture). */
export const readsType = (mimeType: string) => kindOf(mimeType) !== null;

const maxBytes = (kind: Kind) => (kind === "text" ? TEXT_MAX_BYTES : IMAGE_MAX_BYTES);
const capOf = (kind: Kind) => `the ${maxBytes(kind) / 1024} KiB the agent reads of ${kind === "text" ? "a text file" : "an image"}`;
/** What a file adds to its message's files: an image as its base64, a text as itself. */
const storedChars = (kind: Kind, bytes: number) => (kind === "image" ? Math.ceil(bytes / 3) * 4 : bytes);

function attachment(name: string, mimeType: string, kind: Kind, body: Uint8Array): Attachment {
  return kind === "text" ? { name, mimeType, bytes: body.length, kind, text: new TextDecoder().decode(body) } : { name, mimeType, bytes: body.length, kind, data: toBase64(body) };
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
  let room = FILES_MAX_CHARS;
  return Promise.all(
    files.map(({ name, mimeType, bytes, url }) => {
      const named = (note: string): Attachment => ({ name, mimeType, bytes, kind: "named", note });
      const kind = kindOf(mimeType);
      if (!kind) return named("a kind of file the agent cannot read");
      if (bytes > maxBytes(kind)) return named(`larger than ${capOf(kind)}`);
      const stored = storedChars(kind, bytes);
      if (stored > room) return named("the message's files together are more than the agent reads of one message");
      room -= stored;
      if (!url) return named(`${source.platform} gave no link to it that the agent may use`);
      return download(url, source.headers ?? {}, maxBytes(kind), signal).then(
        ({ body }) => attachment(name, mimeType, kind, body),
        (err: unknown) => named(`it could not be fetched (${err instanceof Error ? err.message : String(err)})`),
      );
    }),
  );
}

/**
 * A file given through an API: its bytes, or a link to fetch them from (with
 * no credentials; the caller checked it is https, or http on loopback).
 * `mimeType` null: as the link's server says, else as the name's extension says.
 */
export interface GivenFile {
  /** Where it was in the request, for a refusal ("input[0].content[1]"). */
  at: string;
  name: string;
  mimeType: string | null;
  /** A picture only (the Responses API's input_image). */
  image?: boolean;
  data?: Uint8Array;
  url?: URL;
}

/** Each given file as the model is to see it, read under the chat's kinds and caps; one past them, or that cannot be had, is a 400 naming it and why. */
export async function readGivenFiles(files: GivenFile[]): Promise<Attachment[]> {
  const signal = AbortSignal.timeout(FETCH_DEADLINE_MS);
  const read = await Promise.all(
    files.map(async (file) => {
      const refused = (why: string) => new HttpError(400, `${file.at} (${file.name}): ${why}`);
      let { mimeType, data } = file;
      if (!data) {
        // Read up to the larger cap: which applies is known once the server says the type.
        const got = await download(file.url!, {}, IMAGE_MAX_BYTES, signal).catch((err: unknown) => {
          throw refused(`${file.url} could not be fetched (${err instanceof Error ? err.message : String(err)})`);
        });
        data = got.body;
        mimeType ??= got.type === "application/octet-stream" ? null : got.type;
      }
      mimeType ??= TYPE_OF_EXTENSION[/\.(\w+)$/.exec(file.name)?.[1]?.toLowerCase() ?? ""] ?? null;
      const kind = mimeType === null ? null : kindOf(mimeType);
      if (!kind || (file.image && kind !== "image")) throw refused(`${mimeType ?? "no type given"}: the agent reads ${file.image ? "a picture (PNG, JPEG, GIF, WebP)" : KINDS_READ}`);
      if (data.length > maxBytes(kind)) throw refused(`${data.length} bytes, larger than ${capOf(kind)}`);
      return { file, mimeType: mimeType!, kind, data };
    }),
  );
  const chars = read.reduce((sum, { kind, data }) => sum + storedChars(kind, data.length), 0);
  if (chars > FILES_MAX_CHARS) throw new HttpError(400, `the files come to ${chars} characters (an image as its base64), more than the ${FILES_MAX_CHARS} the agent reads of one message`);
  return read.map(({ file, mimeType, kind, data }) => attachment(file.name, mimeType, kind, data));
}

/** The file's bytes, at most `max` of them (a file larger than said is refused, not read whole), and its type as the server says. */
async function download(url: URL, headers: Record<string, string>, max: number, signal: AbortSignal): Promise<{ body: Uint8Array; type: string | null }> {
  const res = await fetch(url, { headers, redirect: "manual", signal });
  if (res.status !== 200 || !res.body) {
    await res.body?.cancel();
    throw new Error(`HTTP ${res.status}`);
  }
  const type = res.headers.get("content-type")?.split(";")[0]!.trim().toLowerCase() || null;
  return { body: await readAtMost(res.body, max, () => new Error(`larger than ${max / 1024} KiB`)), type };
}

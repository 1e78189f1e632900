// A console form as it is posted: its fields, and the files a message form
// brings. A form with a file input comes as multipart/form-data, so it may be
// as large as one message's files can be; any other form is a small
// url-encoded one. The fields (the form's token among them) are checked the
// same either way. The files are read by the runtime's one path for files
// given through an API (readGivenFiles), under the caps every surface shares,
// so the console's message carries what the Agents API's would.
import type { Context } from "hono";
import { HttpError, mediaType, readBody, readBodyBytes } from "../lib/http.ts";
import { FILE_CAPS, FILES_MAX_CHARS, readGivenFiles, type Attachment } from "../runtime/index.ts";

export interface PostedForm {
  fields: URLSearchParams;
  files: File[];
}

const URLENCODED = "application/x-www-form-urlencoded";
const MULTIPART = "multipart/form-data";
/** A form of fields alone: the sign-in forms, posted before there is a session. */
const FIELDS = { contentTypes: [URLENCODED], maxBytes: 64 * 1024 };
/** A signed-in person's form, with files or not. */
const SESSION_FORM = { ...FIELDS, contentTypes: [URLENCODED, MULTIPART] };
/** The fields and every file one message may bring: a file past its own cap but within this is read, to be refused naming that cap. */
const WITH_FILES = { ...SESSION_FORM, maxBytes: FIELDS.maxBytes + FILES_MAX_CHARS };
/** What a browser sends as a file's type when it does not know it: the name's extension says instead. */
const UNKNOWN_TYPES = new Set(["", "application/octet-stream"]);

/** A sign-in form's fields. */
export async function readSignInForm(c: Context): Promise<URLSearchParams> {
  return new URLSearchParams(await readBody(c, FIELDS));
}

/** A signed-in person's form: read only once the session is known, as a form with files may be large. */
export async function readForm(c: Context): Promise<PostedForm> {
  if (mediaType(c) !== MULTIPART) return { fields: new URLSearchParams(await readBody(c, SESSION_FORM)), files: [] };
  const bytes = await readBodyBytes(c, WITH_FILES).catch((err: unknown) => {
    throw err instanceof HttpError && err.status === 413 ? new HttpError(413, `${err.message}: a message takes ${FILE_CAPS}.`) : err;
  });
  let posted: FormData;
  try {
    posted = await new Response(bytes, { headers: { "content-type": c.req.header("content-type")! } }).formData();
  } catch {
    throw new HttpError(400, "The form's body is not the multipart/form-data its content-type says.");
  }
  const fields = new URLSearchParams();
  const files: File[] = [];
  for (const [name, value] of posted) {
    if (typeof value === "string") fields.append(name, value);
    // A file input left empty sends a part with no file name and no bytes: no file.
    else if (value.name !== "" || value.size > 0) files.push(value);
  }
  return { fields, files };
}

/** The files a message form brought, as the model is to see them; one past the caps is a 400 naming it and the cap. */
export async function attachmentsOf(files: File[]): Promise<Attachment[]> {
  const given = await Promise.all(
    files.map(async (file, i) => ({ at: `files[${i}]`, name: file.name, mimeType: UNKNOWN_TYPES.has(file.type) ? null : file.type, data: new Uint8Array(await file.arrayBuffer()) })),
  );
  return readGivenFiles(given);
}

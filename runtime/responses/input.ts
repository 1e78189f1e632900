// What a Responses API caller sends as `input`, made into our events: the
// person's messages (their text, and the pictures and files among their
// content parts, read and stored as a chat's are: runtime/edge/files.ts),
// their answers to held calls (mcp_approval_response items), each a decision
// on its hold as a click on its card would be, and the outputs of the calls of
// their own function tools (function_call_output items); and those tools, as
// `tools` declares them.
import * as z from "zod";
import { fromBase64 } from "../../lib/base64.ts";
import { HttpError, isHttpsOrLoopback } from "../../lib/http.ts";
import type { ChatUser, Route } from "../chat.ts";
import { FILE_NAME_MAX_CHARS, type GivenFile, readGivenFiles, withStoredImages } from "../edge/index.ts";
import type { FunctionTool, ResponseEvents } from "../feed/index.ts";

const inputText = z.string().trim().min(1, "input must not be empty").max(32_000);

/** `data:<type>;base64,<bytes>` */
const DATA_URL = /^data:([^;,]*)(?:;[^;,]*)*;base64,([\s\S]*)$/;
const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

/** A picture: image_url an https URL or a data: URL. */
const imagePart = z.object({ type: z.literal("input_image"), image_url: z.string().nullish(), file_id: z.string().nullish(), detail: z.string().nullish() });
/** A file: file_data (a data: URL, or base64 with its filename) or file_url. */
const filePart = z.object({ type: z.literal("input_file"), file_data: z.string().nullish(), file_url: z.string().nullish(), file_id: z.string().nullish(), filename: z.string().max(FILE_NAME_MAX_CHARS).nullish() });
type FilePart = z.output<typeof imagePart> | z.output<typeof filePart>;

const NO_FILE_IDS = "is not supported (there is no Files API here)";

/** A data: URL or bare base64 as bytes, or a link (https, http only on loopback); a string that is none is said. */
function sourceOf(value: string, field: string, bare: boolean): Pick<GivenFile, "mimeType" | "data" | "url"> | string {
  const dataUrl = DATA_URL.exec(value);
  const base64 = dataUrl ? dataUrl[2]!.replace(/\s+/g, "") : bare && !value.includes(":") ? value.replace(/\s+/g, "") : null;
  if (base64 !== null) return BASE64.test(base64) && base64.length % 4 === 0 ? { mimeType: dataUrl?.[1]?.toLowerCase() || null, data: fromBase64(base64) } : `${field}: the file's bytes in base64 (this is not base64)`;
  if (value.startsWith("data:")) return `${field}: a data: URL with base64 bytes (data:<type>;base64,…)`;
  if (!bare && URL.canParse(value) && isHttpsOrLoopback(new URL(value))) return { mimeType: null, url: new URL(value) };
  return `${field}: ${bare ? "a data: URL or base64" : "an https URL (http only on loopback) or a data: URL (data:image/png;base64,…)"}`;
}

/** The last part of a link's path, as a file's name. */
const nameIn = (url: URL | undefined) => (url ? decodeURIComponent(url.pathname.split("/").pop() ?? "") : "");

/** A part as the file to read (`at`: where it was), or what is wrong with it. */
function fileOf(part: FilePart, at: string): GivenFile | string {
  if (part.type === "input_image") {
    if (part.file_id) return `input_image's file_id ${NO_FILE_IDS}: give the picture as image_url, an https URL or a data: URL`;
    if (!part.image_url) return "input_image needs image_url: an https URL or a data: URL";
    const source = sourceOf(part.image_url, "image_url", false);
    return typeof source === "string" ? source : { at, name: nameIn(source.url) || "image", image: true, ...source };
  }
  if (part.file_id) return `input_file's file_id ${NO_FILE_IDS}: give the file as file_data (a data: URL, or base64 with its filename) or file_url`;
  if (!part.file_data === !part.file_url) return "input_file needs one of file_data (a data: URL, or base64 with its filename) or file_url";
  const source = part.file_data ? sourceOf(part.file_data, "file_data", true) : sourceOf(part.file_url!, "file_url", false);
  if (typeof source === "string") return source;
  if (source.data && source.mimeType === null && !part.filename) return "input_file: bare base64 file_data needs its filename (its extension says its type)";
  return { at, name: part.filename || nameIn(source.url) || "file", ...source };
}

const textPart = z.object({ type: z.enum(["input_text", "text"]), text: z.string() });
const refined = (part: FilePart, ctx: z.RefinementCtx) => {
  const file = fileOf(part, "");
  if (typeof file === "string") ctx.addIssue({ code: "custom", message: file });
};

const contentPart = z.discriminatedUnion("type", [textPart, imagePart.superRefine(refined), filePart.superRefine(refined)], { error: "a content part is input_text, input_image or input_file" });

/** A string or a list: a misfit is said from the branch the value's kind chose, not as a bare "Invalid input". */
function textOrList<T extends z.ZodType>(list: T, otherwise: string) {
  return z.union([inputText, list], {
    error: (iss) => {
      const issue = (iss as { errors?: { message: string; path: PropertyKey[] }[][] }).errors?.[Array.isArray(iss.input) ? 1 : 0]?.[0];
      return issue ? `${issue.path.length > 0 ? `[${issue.path.join(".")}] ` : ""}${issue.message}` : otherwise;
    },
  });
}

const inputMessage = z.object({
  /** A message may leave its type out (OpenAI's "easy" input message). */
  type: z.literal("message").optional(),
  role: z.literal("user", { error: "input items are the person's messages (role: user); the agent's instructions are its own" }),
  content: textOrList(z.array(contentPart).min(1, "content has no part"), "content: a string, or a list of input_text, input_image and input_file parts"),
});

/** The answer to an mcp_approval_request item: its hold approved or denied, as the caller. */
const approvalResponse = z.object({
  type: z.literal("mcp_approval_response"),
  approval_request_id: z.string().regex(/^h[0-9a-f]{16}$/, "approval_request_id: the id of an mcp_approval_request item (h…)"),
  approve: z.boolean({ error: "approve: true or false" }),
  reason: z.string().max(2_000).nullish(),
  id: z.string().nullish(),
});

/** The caller's output of a call of its function tool: its text, or input_text parts (joined). */
const functionCallOutput = z.object({
  type: z.literal("function_call_output"),
  call_id: z.string().min(1, "call_id: the call_id of the function_call item it answers").max(200),
  output: z.union([z.string().max(256_000), z.array(textPart).min(1)], { error: "output: a string, or a list of input_text parts" }),
  id: z.string().nullish(),
  status: z.string().nullish(),
});

const inputItem = z.discriminatedUnion("type", [inputMessage, approvalResponse, functionCallOutput], {
  error: "an input item is a message (role: user), an mcp_approval_response or a function_call_output",
});

/** The input items that answer something the agent asked in a conversation: they come with previous_response_id (or conversation). */
export const ANSWER_ITEMS: ReadonlySet<string> = new Set(["mcp_approval_response", "function_call_output"]);

/** A caller's function tool (OpenAI's FunctionTool): no parameters is no arguments. */
const functionTool = z.object({
  type: z.literal("function"),
  name: z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, "name: 1 to 64 letters, digits, _ or -"),
  description: z.string().max(8_000).nullish(),
  parameters: z
    .record(z.string(), z.json(), 'parameters: a JSON schema of type "object"')
    .refine((schema) => schema.type === "object", 'parameters: a JSON schema of type "object"')
    .nullish(),
  strict: z.boolean().nullish(),
});

/**
 * `tools`: the caller's function tools, each offered to the model beside the
 * agent's own for the turn the response goes to; a tool of another type is
 * the agent's business (its mounts), and is ignored. Checked here (not
 * transformed: a transform would drop the body's examples from the OpenAPI
 * document); `functionsOf` reads them.
 */
export const callerTools = z
  .array(z.looseObject({ type: z.string({ error: "tools: each tool has a type" }) }))
  .max(128, "tools: at most 128")
  .default([])
  .superRefine((tools, ctx) => {
    const names = new Set<string>();
    tools.forEach((tool, i) => {
      if (tool.type !== "function") return;
      const parsed = functionTool.safeParse(tool);
      if (!parsed.success) return parsed.error.issues.forEach((issue) => ctx.addIssue({ code: "custom", message: `tools[${i}]: ${issue.message}`, path: [i, ...issue.path] }));
      if (names.has(parsed.data.name)) ctx.addIssue({ code: "custom", message: `tools[${i}]: a second function named "${parsed.data.name}"`, path: [i, "name"] });
      names.add(parsed.data.name);
    });
  });

/** The function tools of a checked `tools`, as the model is offered them. */
export function functionsOf(tools: z.output<typeof callerTools>): FunctionTool[] {
  return tools.flatMap((tool) => {
    if (tool.type !== "function") return [];
    const { name, description, parameters, strict } = functionTool.parse(tool);
    return [{ name, description: description ?? "", parameters: parameters ?? { type: "object", properties: {} }, strict: strict ?? false }];
  });
}

/** `input`: a string, or a list of the person's messages and answers to held calls and function calls. */
export const responseInput = textOrList(z.array(inputItem).min(1, "input has no item"), "input: a string, or a list of the person's messages");

type Input = z.output<typeof responseInput>;
type Decision = ResponseEvents["decisions"][number];
type Message = NonNullable<ResponseEvents["message"]>;

/**
 * The input as events, with `id` the response's (a retry with the same id is
 * the same events): the messages' text and files as one message, each file
 * read under the chat's caps and each picture stored in R2 before the object
 * is asked; each approval response a decision by `user`; each function call
 * output its text.
 */
export async function responseEvents(env: Env, route: Route, id: string, conversation: string, user: ChatUser, input: Input): Promise<ResponseEvents> {
  const items = typeof input === "string" ? [{ type: "message" as const, role: "user" as const, content: input }] : input;
  const texts: string[] = [];
  const files: GivenFile[] = [];
  const decisions: Decision[] = [];
  const outputs: ResponseEvents["outputs"] = [];
  items.forEach((item, i) => {
    if (item.type === "mcp_approval_response") {
      const holdId = item.approval_request_id;
      const reason = item.reason?.trim() || undefined;
      decisions.push({ id: `resp:${id}:${holdId}`, kind: "decision", conversation, user, holdId, approve: item.approve, boundTo: route, ...(reason ? { reason } : {}) });
      return;
    }
    if (item.type === "function_call_output") {
      if (outputs.some((o) => o.callId === item.call_id)) throw new HttpError(400, `input[${i}]: a second function_call_output for call_id "${item.call_id}"`);
      outputs.push({ callId: item.call_id, output: typeof item.output === "string" ? item.output : item.output.map((part) => part.text).join("") });
      return;
    }
    if (typeof item.content === "string") return void texts.push(item.content);
    texts.push(item.content.flatMap((part) => ("text" in part ? [part.text] : [])).join(""));
    item.content.forEach((part, j) => {
      if ("text" in part) return;
      const file = fileOf(part, `input[${i}].content[${j}]`);
      if (typeof file === "string") throw new HttpError(400, file); // the body's parse said so already
      files.push(file);
    });
  });
  const text = texts.filter((t) => t.trim() !== "").join("\n\n");
  const given = { conversation, user, decisions, outputs };
  if (text === "" && files.length === 0) {
    if (decisions.length === 0 && outputs.length === 0) throw new HttpError(400, "bad body: input has no words, picture, file, mcp_approval_response or function_call_output");
    return given;
  }
  const attachments = await readGivenFiles(files);
  const message: Message = { id: `resp:${id}`, kind: "message", conversation, user, text, ...(attachments.length > 0 ? { attachments } : {}) };
  return { ...given, message: (await withStoredImages(env, route, message)) as Message };
}

// The Worker's Gemini client, in place of @google/genai (wrangler.jsonc, "alias";
// the tests get the same swap). pi-ai's Gemini entry needs one call of that SDK,
// `models.generateContentStream`, and two enums; the SDK is 57 KiB of the bundle
// gzipped. Here the call is what it is on the wire: one POST of
// `{model}:streamGenerateContent?alt=sse`, read as `data:` events, with the
// SDK's request body and its errors' messages (test/build/gemini.test.ts
// holds it to the real SDK against the same loopback Gemini).

/** Why a candidate stopped (the values pi-ai's google-shared.js compares with). */
export enum FinishReason {
  FINISH_REASON_UNSPECIFIED = "FINISH_REASON_UNSPECIFIED",
  STOP = "STOP",
  MAX_TOKENS = "MAX_TOKENS",
  SAFETY = "SAFETY",
  RECITATION = "RECITATION",
  LANGUAGE = "LANGUAGE",
  OTHER = "OTHER",
  BLOCKLIST = "BLOCKLIST",
  PROHIBITED_CONTENT = "PROHIBITED_CONTENT",
  SPII = "SPII",
  MALFORMED_FUNCTION_CALL = "MALFORMED_FUNCTION_CALL",
  IMAGE_SAFETY = "IMAGE_SAFETY",
  UNEXPECTED_TOOL_CALL = "UNEXPECTED_TOOL_CALL",
  IMAGE_PROHIBITED_CONTENT = "IMAGE_PROHIBITED_CONTENT",
  NO_IMAGE = "NO_IMAGE",
  IMAGE_RECITATION = "IMAGE_RECITATION",
  IMAGE_OTHER = "IMAGE_OTHER",
}

export enum FunctionCallingConfigMode {
  MODE_UNSPECIFIED = "MODE_UNSPECIFIED",
  AUTO = "AUTO",
  ANY = "ANY",
  NONE = "NONE",
  VALIDATED = "VALIDATED",
}

/** An error answer, as the SDK throws it: the body as JSON in the message, the status beside it. */
export class ApiError extends Error {
  override name = "ApiError";
  readonly status: number;

  constructor(options: { message: string; status: number }) {
    super(options.message);
    this.status = options.status;
  }
}

interface ClientOptions {
  apiKey?: string;
  httpOptions?: { baseUrl?: string; apiVersion?: string; headers?: Record<string, string> };
}

interface StreamParams {
  model: string;
  contents: unknown;
  config?: Record<string, unknown> & { abortSignal?: AbortSignal; systemInstruction?: unknown };
}

/** The config keys the API takes beside `generationConfig`; every other key is a generation setting. */
const TOP_LEVEL = new Set(["tools", "toolConfig", "safetySettings", "cachedContent"]);

export class GoogleGenAI {
  readonly models: { generateContentStream: (params: StreamParams) => Promise<AsyncGenerator<unknown>> };

  constructor(private readonly options: ClientOptions) {
    this.models = { generateContentStream: (params) => this.stream(params) };
  }

  private async stream(params: StreamParams): Promise<AsyncGenerator<unknown>> {
    const http = this.options.httpOptions ?? {};
    const base = (http.baseUrl ?? "https://generativelanguage.googleapis.com/").replace(/\/$/, "");
    const version = http.apiVersion ?? (http.baseUrl === undefined ? "v1beta" : "");
    const model = params.model.startsWith("models/") || params.model.startsWith("tunedModels/") ? params.model : `models/${params.model}`;
    const url = [base, ...(version ? [version] : []), `${model}:streamGenerateContent?alt=sse`].join("/");
    const response = await fetch(url, {
      method: "POST",
      headers: { "Content-Type": "application/json", "x-goog-api-key": this.options.apiKey ?? "", ...http.headers },
      body: JSON.stringify(requestBody(params)),
      signal: params.config?.abortSignal,
    });
    if (!response.ok) throw await errorOf(response);
    return events(response);
  }
}

/** The body the SDK sends: contents, the system instruction as a user turn's text, tools and their config at the top, the rest as generationConfig. */
function requestBody({ contents, config }: StreamParams): Record<string, unknown> {
  const body: Record<string, unknown> = { contents };
  if (!config) return body;
  const generationConfig: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(config)) {
    if (value === undefined || value === null || key === "abortSignal" || key === "httpOptions") continue;
    if (key === "systemInstruction") body.systemInstruction = typeof value === "string" ? { role: "user", parts: [{ text: value }] } : value;
    else if (TOP_LEVEL.has(key)) body[key] = value;
    else generationConfig[key] = value;
  }
  body.generationConfig = generationConfig;
  return body;
}

async function errorOf(response: Response): Promise<Error> {
  const body = response.headers.get("content-type")?.includes("application/json")
    ? await response.json()
    : { error: { message: await response.text(), code: response.status, status: response.statusText } };
  const message = JSON.stringify(body);
  return response.status >= 400 && response.status < 600 ? new ApiError({ message, status: response.status }) : new Error(message);
}

/**
 * The `data:` events of the answer, each one response chunk. A piece of the
 * body that is itself an error object (Gemini's way of failing mid-answer)
 * throws, as the SDK does.
 */
async function* events(response: Response): AsyncGenerator<unknown> {
  if (!response.body) throw new Error("Response body is empty");
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  let ended = false;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) {
        ended = true;
        if (buffer.trim().length > 0) throw new Error("Incomplete JSON segment at the end");
        return;
      }
      throwIfError(value);
      buffer += value;
      for (let end = nextEnd(buffer); end; end = nextEnd(buffer)) {
        const event = buffer.slice(0, end.at).trim();
        buffer = buffer.slice(end.at + end.length);
        if (event.startsWith("data:")) yield JSON.parse(event.slice("data:".length).trim());
      }
    }
  } finally {
    // A reader that stops early lets the connection go.
    if (!ended) await reader.cancel().catch(() => undefined);
  }
}

function throwIfError(piece: string): void {
  let parsed: { error?: { code?: number; status?: string } };
  try {
    parsed = JSON.parse(piece);
  } catch {
    return; // an SSE piece, not an error object
  }
  const code = parsed.error?.code;
  if (code !== undefined && code >= 400 && code < 600) throw new ApiError({ message: `got status: ${parsed.error!.status}. ${JSON.stringify(parsed)}`, status: code });
}

/** Where the first complete event in `buffer` ends, by any of the SSE line endings. */
function nextEnd(buffer: string): { at: number; length: number } | null {
  let found: { at: number; length: number } | null = null;
  for (const delimiter of ["\n\n", "\r\r", "\r\n\r\n"]) {
    const at = buffer.indexOf(delimiter);
    if (at !== -1 && (found === null || at < found.at)) found = { at, length: delimiter.length };
  }
  return found;
}

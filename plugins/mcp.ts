// The mcp plugin: a Model Context Protocol server as a mount. Its tools are
// the server's own list, fetched by a courier and kept with the mount (see
// ToolDiscovery), offered as `<alias>__<tool>` with the server's JSON Schema,
// and called with the official SDK's client over Streamable HTTP, or over the
// older HTTP+SSE transport where a server only has that. The server's
// annotations set each tool's defaults: read-only tools are reads, a tool not
// declared read-only or non-destructive waits for a person, and idempotent
// writes may be replayed. A tool that runs only as a task is not offered.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { SSEClientTransport, SseError } from "@modelcontextprotocol/sdk/client/sse.js";
import { StreamableHTTPClientTransport, StreamableHTTPError } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ErrorCode, McpError, ToolListChangedNotificationSchema, type CallToolResult, type Tool } from "@modelcontextprotocol/sdk/types.js";
import { CfWorkerJsonSchemaValidator } from "@modelcontextprotocol/sdk/validation/cfworker";
import * as z from "zod";
import { base64Bytes } from "../lib/base64.ts";
import { isHttpsOrLoopback } from "../lib/http.ts";
import type { FetchedTools, Plugin, PluginTool, ToolContext, ToolImage, ToolOutput } from "./contract.ts";

const configSchema = z.object({
  /** The server's MCP endpoint (for an HTTP+SSE-only server, its SSE endpoint). */
  url: z.url().refine((u) => isHttpsOrLoopback(new URL(u)), "url must be https (http only on loopback)"),
  /** Extra request headers (not secret: they are stored with the mount). */
  headers: z.record(z.string(), z.string()).default({}),
  /** Where the mount's secret goes: `<secretPrefix><secret>` in this header. */
  secretHeader: z.string().min(1).default("authorization"),
  secretPrefix: z.string().default("Bearer "),
  /** "auto": Streamable HTTP, falling back to HTTP+SSE when the server answers a POST with a 4xx. */
  transport: z.enum(["auto", "streamable-http", "sse"]).default("auto"),
  /** Each request to the server (connecting, listing, one call) gives up after this. */
  timeoutMs: z.number().int().positive().max(60_000).default(30_000),
  /** How long a fetched tool list is used before it is fetched again (a server's notice that it changed refetches it sooner). */
  toolsTtlSeconds: z.number().int().positive().max(86_400).default(600),
});
type McpConfig = z.infer<typeof configSchema>;

/** What is kept of each tool the server lists. */
const entrySchema = z.object({
  name: z.string(),
  description: z.string(),
  inputSchema: z.record(z.string(), z.unknown()),
  readOnly: z.boolean(),
  destructive: z.boolean(),
  idempotent: z.boolean(),
  /** Its `execution.taskSupport` is "required": it can only be called as a task, which this client does not do. */
  taskOnly: z.boolean().default(false),
});
type Entry = z.infer<typeof entrySchema>;

/** The session key of the connection kept per mount (never a secret). */
const CONNECTION = "connection";
interface Connection {
  /** The endpoint it was made with: a mount pointed elsewhere starts afresh. */
  url: string;
  transport: "streamable-http" | "sse";
  /** The session the server issued (Streamable HTTP), reused until the server forgets it. */
  sessionId?: string;
  protocolVersion?: string;
}

/** Tools offered per mount: providers refuse requests with many more. */
const MAX_TOOLS = 100;
const MAX_LIST_PAGES = 10;
const MAX_DESCRIPTION = 2_000;
const MAX_SCHEMA_CHARS = 16_000;

const validator = new CfWorkerJsonSchemaValidator();

/** Why a tool whose `execution.taskSupport` is "required" is neither offered nor called (the SDK's client refuses such a call too). */
const TASK_ONLY = 'runs only as an MCP task (its execution.taskSupport is "required"), which this runtime does not support';

export const mcpPlugin: Plugin = {
  name: "mcp",
  description: "The tools of a Model Context Protocol server.",
  config: configSchema,
  tools: [],
  discovery: {
    ttlMs: (config) => (config as McpConfig).toolsTtlSeconds * 1000,
    fetch: async (ctx): Promise<FetchedTools<Entry>> => {
      const config = ctx.config as McpConfig;
      const tools: Tool[] = [];
      try {
        await withServer(config, ctx, async (client) => {
          let cursor: string | undefined;
          for (let page = 0; page < MAX_LIST_PAGES; page++) {
            const result = await client.listTools(cursor === undefined ? undefined : { cursor }, { timeout: config.timeoutMs });
            tools.push(...result.tools);
            cursor = result.nextCursor;
            if (cursor === undefined) break;
          }
        });
      } catch (err) {
        throw new Error(failureText(config, err, "listing its tools"));
      }
      return entriesOf(tools);
    },
    toolsOf: (entries, config) =>
      entries.flatMap((raw) => {
        // Entries were kept by an earlier version of this code, perhaps: one it cannot read is left out.
        const entry = entrySchema.safeParse(raw);
        return entry.success ? [toolOf(entry.data, config as McpConfig)] : [];
      }),
  },
};

function entriesOf(tools: Tool[]): FetchedTools<Entry> {
  const notes: string[] = [];
  const entries: Entry[] = [];
  for (const tool of tools) {
    if (entries.length === MAX_TOOLS) {
      notes.push(`The server lists ${tools.length} tools; the first ${MAX_TOOLS} are offered.`);
      break;
    }
    if (JSON.stringify(tool.inputSchema).length > MAX_SCHEMA_CHARS) {
      notes.push(`"${tool.name}" is left out: its input schema is over ${MAX_SCHEMA_CHARS} characters.`);
      continue;
    }
    const hints = tool.annotations ?? {};
    const readOnly = hints.readOnlyHint === true;
    const taskOnly = tool.execution?.taskSupport === "required";
    if (taskOnly) notes.push(`"${tool.name}" is not offered: it ${TASK_ONLY}.`);
    entries.push({
      name: tool.name,
      description: (tool.description ?? tool.title ?? hints.title ?? "").slice(0, MAX_DESCRIPTION),
      inputSchema: tool.inputSchema,
      readOnly,
      // The protocol's defaults: a tool that is not read-only may be destructive unless it says it is not.
      destructive: !readOnly && hints.destructiveHint !== false,
      idempotent: hints.idempotentHint === true,
      taskOnly,
    });
  }
  return { entries, notes };
}

function toolOf(entry: Entry, config: McpConfig): PluginTool<Record<string, unknown>> {
  return {
    name: entry.name,
    description: entry.description,
    inputSchema: entry.inputSchema,
    parameters: matching(entry.inputSchema),
    sideEffects: entry.readOnly ? "read" : "write",
    idempotency: entry.readOnly || entry.idempotent ? "idempotent" : "never",
    defaultPolicy: entry.destructive ? "approval" : undefined,
    unavailable: entry.taskOnly ? TASK_ONLY : undefined,
    call: (args, ctx) => callTool(entry.name, args, config, ctx),
  };
}

/** Arguments checked against the server's JSON Schema (compiled on first use: most tools of a list are never called). */
function matching(schema: Record<string, unknown>): z.ZodType<Record<string, unknown>> {
  let check: ReturnType<CfWorkerJsonSchemaValidator["getValidator"]> | undefined;
  return z.record(z.string(), z.unknown()).superRefine((args, ctx) => {
    let result;
    try {
      check ??= validator.getValidator(schema as Parameters<CfWorkerJsonSchemaValidator["getValidator"]>[0]);
      result = check(args);
    } catch {
      return; // a schema this validator cannot read: the server checks its own arguments
    }
    if (!result.valid) ctx.addIssue({ code: "custom", message: result.errorMessage ?? "the arguments do not match the tool's schema" });
  });
}

async function callTool(name: string, args: Record<string, unknown>, config: McpConfig, ctx: ToolContext): Promise<ToolOutput> {
  try {
    const result = await withServer(config, ctx, (client) => client.callTool({ name, arguments: args }, undefined, { timeout: config.timeoutMs }));
    if (!("content" in result)) return { text: JSON.stringify(result.toolResult) }; // a server of the 2024-10-07 protocol
    const images = imagesOf(result as CallToolResult);
    return { text: resultText(result as CallToolResult), isError: result.isError === true, ...(images.length ? { images } : {}) };
  } catch (err) {
    return { text: failureText(config, err, `calling ${name}`), isError: true };
  }
}

/** A result's images, in order: they follow its text, for a model that takes images (the runtime stores them). */
function imagesOf(result: CallToolResult): ToolImage[] {
  return result.content.flatMap((block) => (block.type === "image" ? [{ type: "image" as const, data: block.data, mimeType: block.mimeType }] : []));
}

/** Text and structured content for the model; each image named (it follows as image input), other binary content named, not inlined. */
function resultText(result: CallToolResult): string {
  let binaries = 0;
  const parts = result.content.map((block) => {
    switch (block.type) {
      case "text":
        return block.text;
      case "image":
        return `[image ${++binaries}: ${block.mimeType}, ${base64Bytes(block.data)} bytes]`;
      case "audio":
        return `[${block.type} ${++binaries}: ${block.mimeType}, ${base64Bytes(block.data)} bytes, not shown]`;
      case "resource_link":
        return `[resource ${block.name}: ${block.uri}]`;
      case "resource":
        return "text" in block.resource ? block.resource.text : `[resource ${block.resource.uri}${block.resource.mimeType ? ` (${block.resource.mimeType})` : ""}: binary, not shown]`;
      default:
        return `[${(block as { type: string }).type} content, not shown]`;
    }
  });
  if (result.structuredContent !== undefined) {
    const json = JSON.stringify(result.structuredContent);
    // Servers are asked to repeat structured content as text: it is shown once.
    if (!parts.some((text) => sameJson(text, json))) parts.push(`Structured content: ${json}`);
  }
  return parts.join("\n") || "(the tool returned no content)";
}

function sameJson(text: string, json: string): boolean {
  try {
    return JSON.stringify(JSON.parse(text)) === json;
  } catch {
    return false;
  }
}

/** A sentence the model (or `status`) can act on. */
function failureText(config: McpConfig, err: unknown, doing: string): string {
  const host = new URL(config.url).host;
  if (err instanceof McpError && err.code === ErrorCode.RequestTimeout) {
    return `The MCP server at ${host} did not answer within ${config.timeoutMs} ms while ${doing}; whether it acted is unknown.`;
  }
  if (err instanceof McpError) return `The MCP server at ${host} answered with an error while ${doing}: ${err.message}`;
  const message = err instanceof Error ? err.message : String(err);
  if (err instanceof StreamableHTTPError || err instanceof SseError) return `The MCP server at ${host} refused the request while ${doing}: ${message}`;
  return `Could not reach the MCP server at ${host} while ${doing}: ${message}`;
}

type ServerContext = Pick<ToolContext, "secret" | "session" | "toolsChanged">;

/**
 * Runs `use` with a client connected to the server, reusing the session the
 * server issued before. A server that no longer knows it (restarted, or the
 * session expired) handled nothing: a new session is started and the request
 * sent once more, and the tool list is read again, since a server that went
 * away may have come back with other tools.
 */
async function withServer<T>(config: McpConfig, ctx: ServerContext, use: (client: Client) => Promise<T>): Promise<T> {
  const kept = ctx.session.get<Connection>(CONNECTION);
  const saved = kept?.url === config.url ? kept : undefined;
  try {
    return await connected(config, ctx, saved, use);
  } catch (err) {
    if (saved?.sessionId === undefined || !sessionUnknown(err)) throw err;
    ctx.toolsChanged?.();
    return connected(config, ctx, { url: saved.url, transport: saved.transport }, use);
  }
}

/**
 * The server's word that it does not know the session: the protocol's 404, or
 * a 400 or 401 whose body names the session. Servers built like the SDK's
 * examples, the reference server among them, answer a session they never
 * issued (after a restart) "400 Bad Request: No valid session ID provided".
 */
function sessionUnknown(err: unknown): boolean {
  if (!(err instanceof StreamableHTTPError)) return false;
  return err.code === 404 || ((err.code === 400 || err.code === 401) && /session/i.test(err.message));
}

async function connected<T>(config: McpConfig, ctx: ServerContext, saved: Connection | undefined, use: (client: Client) => Promise<T>): Promise<T> {
  const { client, connection } = await connect(config, ctx, saved);
  const kept = ctx.session.get<Connection>(CONNECTION);
  if (JSON.stringify(kept) !== JSON.stringify(connection)) ctx.session.set(CONNECTION, connection);
  try {
    return await use(client);
  } finally {
    // Closing ends this client's streams; the server's session stays for the next call.
    await client.close().catch(() => undefined);
  }
}

async function connect(config: McpConfig, ctx: ServerContext, saved: Connection | undefined): Promise<{ client: Client; connection: Connection }> {
  // The secret's header is the mount's alone: a configured header of that name (in any case) gives way.
  const headers = Object.fromEntries(Object.entries(config.headers).filter(([name]) => !ctx.secret || name.toLowerCase() !== config.secretHeader.toLowerCase()));
  if (ctx.secret) headers[config.secretHeader] = `${config.secretPrefix}${ctx.secret}`;
  const url = new URL(config.url);
  const kind = saved?.transport ?? (config.transport === "sse" ? "sse" : "streamable-http");
  if (kind === "streamable-http") {
    const transport = new StreamableHTTPClientTransport(url, { requestInit: { headers }, sessionId: saved?.sessionId });
    if (saved?.protocolVersion) transport.setProtocolVersion(saved.protocolVersion);
    try {
      const client = await open(transport, config, ctx);
      return { client, connection: { url: config.url, transport: kind, sessionId: transport.sessionId, protocolVersion: transport.protocolVersion } };
    } catch (err) {
      // A server with only the older transport answers the POST with a 4xx: the protocol's test for falling back.
      const olderServer = err instanceof StreamableHTTPError && err.code !== undefined && err.code >= 400 && err.code < 500;
      if (config.transport !== "auto" || saved !== undefined || !olderServer) throw err;
      try {
        return { client: await open(new SSEClientTransport(url, { requestInit: { headers } }), config, ctx), connection: { url: config.url, transport: "sse" } };
      } catch {
        throw err; // neither transport: the first answer says more
      }
    }
  }
  return { client: await open(new SSEClientTransport(url, { requestInit: { headers } }), config, ctx), connection: { url: config.url, transport: "sse" } };
}

async function open(transport: StreamableHTTPClientTransport | SSEClientTransport, config: McpConfig, ctx: ServerContext): Promise<Client> {
  // The SDK's default validator compiles schemas to code, which workerd forbids.
  const client = new Client({ name: "antiproton", version: "0.1.0" }, { jsonSchemaValidator: validator });
  client.setNotificationHandler(ToolListChangedNotificationSchema, () => ctx.toolsChanged?.());
  await client.connect(transport, { timeout: config.timeoutMs });
  return client;
}

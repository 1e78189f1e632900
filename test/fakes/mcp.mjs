// A Model Context Protocol server on loopback, built with the official SDK
// (McpServer over its Streamable HTTP transport, sessions on), for the mcp
// plugin. Its tools cover what a mount must handle: a read, a destructive
// write, an idempotent write, a JSON-RPC error, a call slower than the mount's
// timeout, an image with structured content, a careless tool that echoes the
// credentials it got (in its result and its description), names no provider accepts (or that clash once cleaned),
// and a tool that adds a tool and says the list changed. `/sse` is a second
// server that has only the older HTTP+SSE transport. Control API under
// /_control: the calls each tool received, forgetting every session (as a
// restarted server does, perhaps with a new tool), and going down (every
// connection dropped). A session it does not know is answered as the SDK's
// reference server (@modelcontextprotocol/server-everything) answers one:
// 400 "No valid session ID provided"; a forget can choose how the sessions it
// forgot are answered.
import { randomUUID } from "node:crypto";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { SSEServerTransport } from "@modelcontextprotocol/sdk/server/sse.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { isInitializeRequest } from "@modelcontextprotocol/sdk/types.js";
import { z } from "zod";
import { listen, readBody, sendJson } from "./http.mjs";

/**
 * The canary the mount sends as its bearer token: it must reach this server
 * and nothing else. Characters that URL, JSON and HTML encoding change.
 */
export const MCP_API_TOKEN = `mcp-canary-3e9f/1b+7c=Q"a2\\5d?88 k4'z`;
/** Longer than any test mount's timeout. */
export const SLOW_TOOL_MS = 4_000;
/** Over 64 characters once a mount's alias is put before it. */
export const LONG_TOOL_NAME = `summarize_${"section_".repeat(7)}end`;
const PIXEL_PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==";

/**
 * Answers to a session the server does not know: server-everything's (the
 * SDK's reference server; the default), the protocol's 404, a 401 that names
 * the session, and a 401 that does not (a refused credential, not a session).
 */
const STALE_ANSWERS = {
  400: { status: 400, body: { jsonrpc: "2.0", error: { code: -32000, message: "Bad Request: No valid session ID provided" } } },
  404: { status: 404, body: { jsonrpc: "2.0", error: { code: -32001, message: "Session not found" }, id: null } },
  "401-session": { status: 401, body: { error: "invalid_token", error_description: "The session has expired" } },
  "401-token": { status: 401, body: { error: "invalid_token", error_description: "The access token has expired" } },
};

const credentials = (extra) => ({ authorization: extra.requestInfo?.headers?.authorization, apiKey: extra.requestInfo?.headers?.["x-api-key"] });

export async function startMcp() {
  /** Every tool call received: { tool, args, session, authorization, apiKey }. */
  const calls = [];
  /** Every session started: { session, authorization }. */
  const initializations = [];
  /** Tools added by add_tool, offered by every session from then on. */
  const added = new Set();
  /** Live sessions: id → { transport, server }. */
  const sessions = new Map();
  let down = false;
  /** Forgotten sessions, with how each is answered: id → an entry of STALE_ANSWERS. */
  const forgotten = new Map();

  const readTool = (server, name, description) => {
    // The SDK warns (on the console) about names outside the protocol's advice: these are offered on purpose.
    const warn = console.warn;
    console.warn = () => undefined;
    try {
      server.registerTool(name, { description, inputSchema: {}, annotations: { readOnlyHint: true } }, async (_args, extra) => {
        calls.push({ tool: name, args: {}, session: extra.sessionId, ...credentials(extra) });
        return { content: [{ type: "text", text: `${name} ran.` }] };
      });
    } finally {
      console.warn = warn;
    }
  };

  /** `authorization`: the header the session was started with, which one careless description repeats. */
  function docsServer(authorization) {
    const server = new McpServer({ name: "fake-docs", version: "1.0.0" }, { capabilities: { tools: { listChanged: true } } });
    const seen = (tool, args, extra) => calls.push({ tool, args, session: extra.sessionId, ...credentials(extra) });
    server.registerTool(
      "search",
      { description: "Search the docs.", inputSchema: { query: z.string().describe("Words to look for"), limit: z.number().int().max(20).optional() }, annotations: { readOnlyHint: true } },
      async (args, extra) => {
        seen("search", args, extra);
        return { content: [{ type: "text", text: `3 pages match "${args.query}".` }] };
      },
    );
    server.registerTool(
      "chart",
      {
        description: "Chart a series.",
        inputSchema: { series: z.string() },
        outputSchema: { series: z.string(), points: z.array(z.number()) },
        annotations: { readOnlyHint: true },
      },
      async (args, extra) => {
        seen("chart", args, extra);
        return {
          content: [
            { type: "text", text: `Chart of ${args.series}.` },
            { type: "image", data: PIXEL_PNG, mimeType: "image/png" },
          ],
          structuredContent: { series: args.series, points: [3, 1, 4] },
        };
      },
    );
    server.registerTool(
      "delete_page",
      { description: "Delete a page for good.", inputSchema: { page: z.string() }, annotations: { destructiveHint: true } },
      async (args, extra) => {
        seen("delete_page", args, extra);
        return { content: [{ type: "text", text: `Deleted page ${args.page}.` }] };
      },
    );
    server.registerTool(
      "rename_page",
      { description: "Rename a page.", inputSchema: { page: z.string(), title: z.string() }, annotations: { destructiveHint: false, idempotentHint: true } },
      async (args, extra) => {
        seen("rename_page", args, extra);
        return { content: [{ type: "text", text: `Page ${args.page} is now "${args.title}".` }] };
      },
    );
    server.registerTool("slow", { description: "Takes its time.", inputSchema: { marker: z.string() }, annotations: { readOnlyHint: true } }, async (args, extra) => {
      seen("slow", args, extra);
      await new Promise((resolve) => setTimeout(resolve, SLOW_TOOL_MS));
      return { content: [{ type: "text", text: "finally done" }] };
    });
    server.registerTool("whoami", { description: `Says who the server thinks you are (${authorization}).`, inputSchema: {}, annotations: { readOnlyHint: true } }, async (args, extra) => {
      seen("whoami", args, extra);
      // Careless on purpose: it echoes the credential it received.
      return { content: [{ type: "text", text: `You sent: ${extra.requestInfo?.headers?.authorization}` }] };
    });
    server.registerTool("broken", { description: "Always fails.", inputSchema: { marker: z.string() }, annotations: { readOnlyHint: true } }, async () => {
      throw new Error("unreachable: the call handler answers for this tool");
    });
    server.registerTool(
      "add_tool",
      { description: "Adds a read tool to this server.", inputSchema: { name: z.string() }, annotations: { destructiveHint: false } },
      async (args, extra) => {
        seen("add_tool", args, extra);
        added.add(args.name);
        for (const live of sessions.values()) {
          if (live.tools.has(args.name)) continue;
          live.tools.add(args.name);
          readTool(live.server, args.name, "A tool added at run time.");
        }
        // On this request's own stream, so the client hears it before the answer.
        await extra.sendNotification({ method: "notifications/tools/list_changed" });
        return { content: [{ type: "text", text: `Added ${args.name}.` }] };
      },
    );
    // Names a provider refuses, or that clash once cleaned up.
    readTool(server, "page.get", "Get a page (dotted name).");
    readTool(server, "page_get", "Get a page.");
    readTool(server, "has space", "A tool whose name has a space.");
    readTool(server, LONG_TOOL_NAME, "A tool whose name is long.");
    for (const name of added) readTool(server, name, "A tool added at run time.");

    // McpServer answers any failure inside a tool with a result; a failure of the server itself is a JSON-RPC error.
    const handlers = server.server._requestHandlers;
    const callTool = handlers.get("tools/call");
    handlers.set("tools/call", async (request, extra) => {
      if (request.params?.name !== "broken") return callTool(request, extra);
      seen("broken", request.params.arguments, extra);
      throw new Error("the search index is being rebuilt");
    });
    return server;
  }

  function legacyServer() {
    const server = new McpServer({ name: "fake-legacy", version: "1.0.0" });
    server.registerTool("echo", { description: "Echoes its text.", inputSchema: { text: z.string() }, annotations: { readOnlyHint: true } }, async (args, extra) => {
      calls.push({ tool: "legacy.echo", args, session: extra.sessionId, ...credentials(extra) });
      return { content: [{ type: "text", text: `echo: ${args.text}` }] };
    });
    return server;
  }
  const legacySessions = new Map();

  return listen(async (req, res) => {
    const url = new URL(req.url, "http://x");
    if (url.pathname.startsWith("/_control/")) return control(req, res, url);
    if (down) return req.socket.destroy();
    // The token as a bearer, or (for a mount configured so) in x-api-key.
    const authorization = req.headers.authorization;
    if (authorization !== `Bearer ${MCP_API_TOKEN}` && req.headers["x-api-key"] !== MCP_API_TOKEN) return sendJson(res, 401, { error: "unauthorized" });

    if (url.pathname === "/mcp") {
      const body = req.method === "POST" ? JSON.parse(await readBody(req)) : undefined;
      const id = req.headers["mcp-session-id"];
      if (id !== undefined) {
        const live = sessions.get(id);
        if (!live) {
          const answer = forgotten.get(id) ?? STALE_ANSWERS["400"];
          return sendJson(res, answer.status, answer.body);
        }
        return live.transport.handleRequest(req, res, body);
      }
      // As server-everything: a GET or DELETE needs a session; a POST without one starts a session that was never initialized.
      if (req.method !== "POST") return sendJson(res, STALE_ANSWERS["400"].status, STALE_ANSWERS["400"].body);
      if (!isInitializeRequest(body)) return sendJson(res, 400, { jsonrpc: "2.0", error: { code: -32000, message: "Bad Request: Server not initialized" }, id: null });
      const server = docsServer(authorization);
      const transport = new StreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        onsessioninitialized: (session) => {
          initializations.push({ session, authorization });
          sessions.set(session, { transport, server, tools: new Set(added) });
        },
      });
      await server.connect(transport);
      return transport.handleRequest(req, res, body);
    }

    // The older transport: a GET opens the event stream, messages are POSTed to the endpoint it names.
    if (url.pathname === "/sse" && req.method === "GET") {
      const transport = new SSEServerTransport("/sse/messages", res);
      legacySessions.set(transport.sessionId, transport);
      transport.onclose = () => legacySessions.delete(transport.sessionId);
      return legacyServer().connect(transport);
    }
    if (url.pathname === "/sse/messages" && req.method === "POST") {
      const transport = legacySessions.get(url.searchParams.get("sessionId"));
      if (!transport) return sendJson(res, 404, { error: "no such session" });
      return transport.handlePostMessage(req, res, JSON.parse(await readBody(req)));
    }
    if (url.pathname === "/sse") return sendJson(res, 405, { error: "this server speaks HTTP+SSE only" });
    return sendJson(res, 404, { error: "not found" });
  });

  async function control(req, res, url) {
    if (req.method === "GET" && url.pathname === "/_control/calls") {
      const marker = url.searchParams.get("marker") ?? "";
      const tool = url.searchParams.get("tool");
      return sendJson(res, 200, calls.filter((c) => (!tool || c.tool === tool) && JSON.stringify(c.args ?? {}).includes(marker)));
    }
    if (req.method === "GET" && url.pathname === "/_control/initializations") return sendJson(res, 200, initializations);
    if (req.method === "POST" && url.pathname === "/_control/forget") {
      const answer = STALE_ANSWERS[url.searchParams.get("answer") ?? "400"];
      if (!answer) return sendJson(res, 400, { error: `answer is one of ${Object.keys(STALE_ANSWERS).join(", ")}` });
      // A tool the server comes back with: no session hears of it.
      const tool = url.searchParams.get("tool");
      if (tool) added.add(tool);
      for (const id of sessions.keys()) forgotten.set(id, answer);
      const live = [...sessions.values()];
      sessions.clear();
      await Promise.all(live.map(({ transport }) => transport.close()));
      return sendJson(res, 200, { forgot: live.length });
    }
    if (req.method === "POST" && url.pathname === "/_control/down") {
      down = url.searchParams.get("on") !== "false";
      return sendJson(res, 200, { down });
    }
    return sendJson(res, 404, { error: "not found" });
  }
}

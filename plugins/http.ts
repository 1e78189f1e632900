// The http plugin: GET and POST to the hosts a mount allows, with the mount's
// secret injected as a header. Pages come back as text, capped in size and
// time; every failure is a result the model can read.
import * as z from "zod";
import { isHttpsOrLoopback } from "../lib/http.ts";
import type { Plugin, ToolContext, ToolOutput } from "./contract.ts";

const configSchema = z.object({
  /** Hosts (with port if not default) the mount may reach; "*.example.com" allows subdomains. */
  allowedHosts: z.array(z.string().min(1)).min(1, "allowedHosts must name at least one host"),
  secretHeader: z.string().default("authorization"),
  secretPrefix: z.string().default("Bearer "),
  timeoutMs: z.number().int().positive().max(60_000).default(10_000),
  maxBytes: z.number().int().positive().max(1_000_000).default(100_000),
});
type HttpConfig = z.infer<typeof configSchema>;

const headersSchema = z.record(z.string(), z.string()).optional().describe("Extra request headers");

function hostAllowed(url: URL, allowed: string[]): boolean {
  return allowed.some((pattern) => {
    if (pattern.startsWith("*.")) return url.hostname.endsWith(pattern.slice(1)) && !url.port;
    return pattern === url.host;
  });
}

/** Reduces HTML to readable text: no scripts, styles or tags; entities decoded; space collapsed. */
export function htmlToText(html: string): string {
  return html
    .replace(/<(script|style|noscript|template)\b[\s\S]*?<\/\1>/gi, " ")
    .replace(/<!--[\s\S]*?-->/g, " ")
    .replace(/<(br|\/p|\/div|\/li|\/h[1-6]|\/tr)\b[^>]*>/gi, "\n")
    .replace(/<[^>]+>/g, " ")
    .replace(/&nbsp;/g, " ")
    .replace(/&lt;/g, "<")
    .replace(/&gt;/g, ">")
    .replace(/&quot;/g, '"')
    .replace(/&#39;/g, "'")
    .replace(/&#(\d+);/g, (_, n: string) => String.fromCodePoint(Number(n)))
    .replace(/&amp;/g, "&")
    .replace(/[ \t\f\v]+/g, " ")
    .replace(/\s*\n\s*/g, "\n")
    .trim();
}

async function readCapped(res: Response, maxBytes: number): Promise<{ text: string; truncated: boolean }> {
  const reader = res.body?.getReader();
  if (!reader) return { text: "", truncated: false };
  const chunks: Uint8Array[] = [];
  let size = 0;
  let truncated = false;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    chunks.push(value);
    size += value.byteLength;
    if (size >= maxBytes) {
      truncated = true;
      await reader.cancel();
      break;
    }
  }
  const bytes = new Uint8Array(size);
  let offset = 0;
  for (const c of chunks) {
    bytes.set(c, offset);
    offset += c.byteLength;
  }
  return { text: new TextDecoder().decode(bytes.slice(0, maxBytes)), truncated };
}

async function request(method: "GET" | "POST", target: string, headers: Record<string, string> | undefined, body: string | undefined, ctx: ToolContext): Promise<ToolOutput> {
  const config = ctx.config as HttpConfig;
  let url: URL;
  try {
    url = new URL(target);
  } catch {
    return { text: `"${target}" is not a URL.`, isError: true };
  }
  if (!isHttpsOrLoopback(url)) {
    return { text: `Only https URLs are allowed (got ${url.protocol}).`, isError: true };
  }
  if (!hostAllowed(url, config.allowedHosts)) {
    return { text: `Host ${url.host} is not allowed for this mount. Allowed: ${config.allowedHosts.join(", ")}.`, isError: true };
  }
  const outgoing = new Headers();
  for (const [name, value] of Object.entries(headers ?? {})) {
    if (name.toLowerCase() !== config.secretHeader.toLowerCase()) outgoing.set(name, value);
  }
  if (ctx.secret) outgoing.set(config.secretHeader, `${config.secretPrefix}${ctx.secret}`);
  let res: Response;
  try {
    res = await fetch(url, { method, headers: outgoing, body, redirect: "manual", signal: AbortSignal.timeout(config.timeoutMs) });
  } catch (err) {
    const timedOut = err instanceof Error && (err.name === "TimeoutError" || err.name === "AbortError");
    return { text: timedOut ? `${method} ${url.host} took longer than ${config.timeoutMs} ms.` : `${method} ${url.host} failed: ${String(err)}`, isError: true };
  }
  if (res.status >= 300 && res.status < 400) {
    await res.body?.cancel();
    return { text: `HTTP ${res.status}: redirected to ${res.headers.get("location") ?? "(no location)"}; not followed.`, isError: true };
  }
  const type = res.headers.get("content-type") ?? "";
  const { text, truncated } = await readCapped(res, config.maxBytes);
  const shown = /html/i.test(type) ? htmlToText(text) : text;
  const note = truncated ? `\n[truncated at ${config.maxBytes} bytes]` : "";
  return { text: `HTTP ${res.status} ${type}\n\n${shown}${note}`, isError: res.status >= 400 };
}

export const httpPlugin: Plugin = {
  name: "http",
  description: "HTTP requests to the hosts a mount allows.",
  config: configSchema,
  // A POST can change the world irreversibly: a person signs it unless the mount's per-tool entry says otherwise.
  defaultPolicy: { post: "approval" },
  tools: [
    {
      name: "get",
      description: "GET a URL on an allowed host. HTML is returned as text.",
      parameters: z.object({ url: z.string().describe("Absolute URL"), headers: headersSchema }),
      sideEffects: "read",
      idempotency: "idempotent",
      call: ({ url, headers }, ctx) => request("GET", url, headers, undefined, ctx),
    },
    {
      name: "post",
      description: "POST a body to a URL on an allowed host.",
      parameters: z.object({
        url: z.string().describe("Absolute URL"),
        body: z.union([z.string(), z.record(z.string(), z.unknown())]).describe("A string, or an object sent as JSON"),
        headers: headersSchema,
      }),
      sideEffects: "write",
      idempotency: "never",
      call: ({ url, body, headers }, ctx) => {
        const json = typeof body !== "string";
        const withType = json ? { "content-type": "application/json", ...headers } : headers;
        return request("POST", url, withType, json ? JSON.stringify(body) : body, ctx);
      },
    },
  ],
};

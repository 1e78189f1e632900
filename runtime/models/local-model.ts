// The built-in offline model: deterministic, no network. It lets a newcomer see
// a whole turn (a tool call, and a call held for approval) before configuring
// a provider.
import type { AssistantMessage, ToolCall } from "@mariozechner/pi-ai";
import type { ModelRequest } from "./request.ts";
import { RUNTIME_NOTE_PREFIX, textOf } from "../store/index.ts";

const ZERO_USAGE = {
  input: 0,
  output: 0,
  cacheRead: 0,
  cacheWrite: 0,
  totalTokens: 0,
  cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 },
};

/** How the runtime answers a call it held (runtime/object/agent-object.ts heldResult); read here as a model would read it. */
const HELD = /^Held for approval\b/;
/** "please post hello to https://…": what to send, and where. */
const POST_REQUEST = /\bpost\s+(.+?)\s+to\s+(https?:\/\/\S+?)[.,;!?]?$/i;
const TIME_REQUEST = /\b(time|clock|date|today)\b/i;

function reply(content: AssistantMessage["content"], stopReason: AssistantMessage["stopReason"]): AssistantMessage {
  return {
    role: "assistant",
    content,
    api: "local",
    provider: "local",
    model: "antiproton-local",
    usage: ZERO_USAGE,
    stopReason,
    timestamp: Date.now(),
  };
}

const say = (text: string) => reply([{ type: "text", text }], "stop");

function call(request: ModelRequest, name: string, args: Record<string, unknown>, preface: string): AssistantMessage {
  const seq = request.messages.filter((m) => m.role === "assistant").length;
  const toolCall: ToolCall = { type: "toolCall", id: `local_${seq}`, name, arguments: args };
  return reply([{ type: "text", text: preface }, toolCall], "toolUse");
}

const unquote = (text: string) => text.replace(/^(["'“‘])(.*)["'”’]$/s, "$2");

/**
 * Asks for the time → calls the first `…__now` tool; asks to post something to
 * a URL → calls the first `…__post` tool. A tool's result is reported; a held
 * call is explained; a runtime note (such as a held call's outcome) is passed on.
 * Anything else → a short, fixed answer that quotes the person.
 */
export function localModel(request: ModelRequest): AssistantMessage {
  const last = request.messages.at(-1);
  if (!last) return say("Hello! Nothing to answer yet.");
  if (last.role === "toolResult") {
    const result = textOf(last.content);
    if (HELD.test(result)) {
      return say(`I have asked for approval to run ${last.toolName}; it has not run yet. I will tell you what happened once someone decides.`);
    }
    return say(`${last.toolName} ${last.isError ? "failed" : "says"}: ${result}`);
  }
  const said = textOf(last.content).trim();
  if (said.startsWith(RUNTIME_NOTE_PREFIX)) {
    const note = said.slice(RUNTIME_NOTE_PREFIX.length);
    return say(`Update: ${note.charAt(0).toLowerCase()}${note.slice(1)}`);
  }
  const clock = request.tools.find((t) => t.name.endsWith("__now"));
  if (clock && TIME_REQUEST.test(said)) return call(request, clock.name, {}, "Let me check the clock.");
  const post = request.tools.find((t) => t.name.endsWith("__post"));
  const wanted = POST_REQUEST.exec(said);
  if (post && wanted) {
    const [, body = "", url = ""] = wanted;
    return call(request, post.name, { url, body: unquote(body) }, `I will post that to ${url}.`);
  }
  const postHint = post ? ` or post text to a URL (ask me "please post hello to <url>")` : "";
  return say(
    `You said: "${said}". I am antiproton's offline local model, so I can only echo you and ` +
      `tell the time (ask me "what time is it?")${postHint}. ` +
      `Set MODEL_PROVIDERS and HARNESS_MODEL to talk to a real model.`,
  );
}

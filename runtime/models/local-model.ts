// The built-in offline model: deterministic, no network. It lets a newcomer see
// a whole turn (including a tool call) before configuring a provider.
import type { AssistantMessage, Message, ToolCall } from "@mariozechner/pi-ai";
import type { ModelRequest } from "../model-job.ts";

const ZERO_USAGE = {
  input: 0,
  output: 0,
  cacheRead: 0,
  cacheWrite: 0,
  totalTokens: 0,
  cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 },
};

function textOf(message: Message): string {
  if (message.role === "assistant") return message.content.map((c) => (c.type === "text" ? c.text : "")).join("");
  if (typeof message.content === "string") return message.content;
  return message.content.map((c) => (c.type === "text" ? c.text : "")).join("");
}

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

/**
 * Asks for the time → calls the first `…__now` tool, then reports its result.
 * Anything else → a short, fixed answer that quotes the person.
 */
export function localModel(request: ModelRequest): AssistantMessage {
  const last = request.messages.at(-1);
  if (!last) return reply([{ type: "text", text: "Hello! Nothing to answer yet." }], "stop");
  if (last.role === "toolResult") {
    const verb = last.isError ? "failed" : "says";
    return reply([{ type: "text", text: `${last.toolName} ${verb}: ${textOf(last)}` }], "stop");
  }
  const said = textOf(last).trim();
  const clock = request.tools.find((t) => t.name.endsWith("__now"));
  if (clock && /\b(time|clock|date|today)\b/i.test(said)) {
    const seq = request.messages.filter((m) => m.role === "assistant").length;
    const call: ToolCall = { type: "toolCall", id: `local_${seq}`, name: clock.name, arguments: {} };
    return reply([{ type: "text", text: "Let me check the clock." }, call], "toolUse");
  }
  return reply(
    [
      {
        type: "text",
        text:
          `You said: "${said}". I am antiproton's offline local model, so I can only echo you ` +
          `and tell the time (ask me "what time is it?"). Set MODEL_PROVIDERS and HARNESS_MODEL to talk to a real model.`,
      },
    ],
    "stop",
  );
}

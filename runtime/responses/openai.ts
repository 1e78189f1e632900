// The agent's turn in the OpenAI Responses API's words: the Response object,
// its output items (a message, a function call and its output, a call held
// for approval), the stream's events and the error body.
import type { Card } from "../../approvals/index.ts";
import type { FeedEvent, ResponseState } from "../feed/index.ts";

type Json = Record<string, unknown>;

/** An output item, with the feed event it came from (a stream sends each once, in order); a message's, with the model call that wrote it. */
export interface OutputItem {
  item: Json & { id: string; type: string };
  from: number;
  calledAt?: number;
}

/**
 * What comes before an agent message that follows another in one response:
 * OpenAI's clients make `output_text` by joining the messages' texts as they
 * are, so each message after the first starts a paragraph of its own.
 */
export const MESSAGE_SEPARATOR = "\n\n";

/** A message item's id: its model call's, so a stream names the item while the call still writes it. */
export const messageId = (calledAt: number) => `msg_${calledAt}`;

/** The output items of a response's events: what the agent said and called, and what it was answered. */
export function outputItems(events: FeedEvent[]): OutputItem[] {
  let said = false;
  return events.flatMap((event): OutputItem[] => {
    const from = event.id;
    if (event.type === "message" && event.entry.role === "assistant") {
      const { text, toolCalls, calledAt } = event.entry;
      const message = text ? [{ from, calledAt, item: messageItem(messageId(calledAt), `${said ? MESSAGE_SEPARATOR : ""}${text}`) }] : [];
      said ||= message.length > 0;
      const calls = toolCalls.map((call, i) => ({
        from,
        item: { type: "function_call", id: `fc_${from}_${i}`, call_id: call.id, name: call.name, arguments: JSON.stringify(call.arguments ?? {}), status: "completed" },
      }));
      return [...message, ...calls];
    }
    if (event.type === "tool_result") {
      const { toolCallId, text } = event.entry;
      return [{ from, item: { type: "function_call_output", id: `fco_${from}`, call_id: toolCallId, output: text, status: "completed" } }];
    }
    if (event.type === "hold" && event.card.state === "pending") return [{ from, item: heldItem(event.card) }];
    if (event.type === "hold" && SETTLED.has(event.card.state)) return [{ from, item: performedItem(event.card) }];
    return [];
  });
}

export function messageItem(id: string, text: string): OutputItem["item"] {
  return { type: "message", id, role: "assistant", status: "completed", content: [{ type: "output_text", text, annotations: [], logprobs: [] }] };
}

/** A tool as the Responses API names an MCP server's: the mount's alias (server_label) and the tool's name on it. */
function toolOf(card: Card): { server_label: string; name: string } {
  const [alias, ...name] = card.tool.split("__");
  return { server_label: alias!, name: name.join("__") || card.tool };
}

/**
 * A held call: the Responses API's approval request item, with a sentence
 * saying it is held and how it is decided (an mcp_approval_response input item
 * answers it too).
 */
function heldItem(card: Card): OutputItem["item"] {
  const how =
    `${card.title}: held for approval until ${new Date(card.expiresAt).toISOString()}. ` +
    "A person allowed to decide approves or denies it: an mcp_approval_response input item in a following create (with previous_response_id), its card in the conversation's chat, the console, or the Agents API's holds; the agent is told the outcome at its next step.";
  return { type: "mcp_approval_request", id: card.holdId, ...toolOf(card), arguments: card.arguments, held: { text: how, expires_at: Math.floor(card.expiresAt / 1000) } };
}

/** The states of a held call that was approved and whose performance ended. */
const SETTLED = new Set(["performed", "failed", "refused", "unknown"]);

/** An approved call, once performed (or given up): the Responses API's MCP call item, answering its approval request. */
function performedItem(card: Card): OutputItem["item"] {
  const failed = card.state !== "performed";
  return {
    type: "mcp_call", id: `mcp_${card.holdId}`, approval_request_id: card.holdId, ...toolOf(card), arguments: card.arguments,
    output: failed ? null : (card.outcome ?? ""), error: failed ? (card.outcome ?? card.state) : null, status: failed ? "failed" : "completed",
  };
}

/** The Response object as OpenAI's clients read it (`output_text` too, for those that do not add it). */
export function responseObject(state: ResponseState, output: OutputItem[] = outputItems(state.events)): Json {
  const items = output.map((o) => o.item);
  const { request } = state;
  return {
    id: state.id,
    object: "response",
    created_at: Math.floor(state.createdAt / 1000),
    status: state.status,
    background: request.background,
    error: state.status === "failed" ? { code: "server_error", message: state.error ?? "the turn failed" } : null,
    incomplete_details: null,
    instructions: null,
    max_output_tokens: null,
    model: request.model,
    output: items,
    output_text: items.flatMap((item) => (item.type === "message" ? (item.content as { text: string }[]).map((part) => part.text) : [])).join(""),
    parallel_tool_calls: true,
    previous_response_id: request.previousResponseId,
    conversation: { id: state.conversation },
    metadata: request.metadata,
    store: true,
    temperature: null,
    top_p: null,
    text: { format: { type: "text" } },
    tool_choice: "auto",
    tools: (request.tools ?? []).map((tool) => ({ type: "function", ...tool })),
    truncation: "disabled",
    // OpenAI counts cached input in input_tokens; the provider call counts it apart.
    usage: {
      input_tokens: state.usage.input + state.usage.cached,
      input_tokens_details: { cached_tokens: state.usage.cached },
      output_tokens: state.usage.output,
      output_tokens_details: { reasoning_tokens: 0 },
      total_tokens: state.usage.input + state.usage.cached + state.usage.output,
    },
  };
}

/** A stream event: its `type`, and the rest of its data (the sequence number is added as it is sent). */
export type StreamEvent = Json & { type: string };

/** A message item's text. */
export const messageText = (item: OutputItem["item"]) => (item.content as { text: string }[])[0]!.text;

const textPart = (text: string) => ({ type: "output_text", text, annotations: [], logprobs: [] });

/** The events that open a message item, before its text. */
export function messageOpening(output_index: number, item: OutputItem["item"]): StreamEvent[] {
  return [
    { type: "response.output_item.added", output_index, item: { ...item, status: "in_progress", content: [] } },
    { type: "response.content_part.added", item_id: item.id, output_index, content_index: 0, part: textPart("") },
  ];
}

/**
 * How many characters a text delta carries (a message's last, up to as many):
 * a message's deltas are cut from its text alone, never from how its pieces
 * came, so a stream sent again from its start (a resume after a sequence
 * number) is the same events, numbered the same.
 */
export const DELTA_CHARS = 8;

/**
 * The text deltas of `text` from character `from` (where the last one ended):
 * those whose end is known before the text is (one character is looked past,
 * so a surrogate pair is never cut), or every one to its end once `whole`.
 * Answers the events and where they end.
 */
export function textDeltas(output_index: number, item_id: string, text: string, from: number, whole: boolean): { events: StreamEvent[]; to: number } {
  const events: StreamEvent[] = [];
  let at = from;
  while (whole ? at < text.length : text.length > at + DELTA_CHARS) {
    let end = Math.min(at + DELTA_CHARS, text.length);
    const last = text.charCodeAt(end - 1);
    if (end < text.length && last >= 0xd800 && last <= 0xdbff) end++;
    events.push({ type: "response.output_text.delta", item_id, output_index, content_index: 0, delta: text.slice(at, end), logprobs: [] });
    at = end;
  }
  return { events, to: at };
}

/** The events that close a message item, with its whole text. */
export function messageClosing(output_index: number, item: OutputItem["item"]): StreamEvent[] {
  const text = messageText(item);
  const at = { item_id: item.id, output_index, content_index: 0 };
  return [
    { type: "response.output_text.done", ...at, text, logprobs: [] },
    { type: "response.content_part.done", ...at, part: textPart(text) },
    { type: "response.output_item.done", output_index, item },
  ];
}

/** The events that send one output item: added, its content or arguments, done. */
export function itemEvents(output_index: number, item: OutputItem["item"]): StreamEvent[] {
  const done = { type: "response.output_item.done", output_index, item };
  if (item.type === "message") return [...messageOpening(output_index, item), ...textDeltas(output_index, item.id, messageText(item), 0, true).events, ...messageClosing(output_index, item)];
  if (item.type === "function_call") {
    const args = item.arguments as string;
    return [
      { type: "response.output_item.added", output_index, item: { ...item, status: "in_progress", arguments: "" } },
      { type: "response.function_call_arguments.delta", item_id: item.id, output_index, delta: args },
      { type: "response.function_call_arguments.done", item_id: item.id, output_index, arguments: args },
      done,
    ];
  }
  return [{ type: "response.output_item.added", output_index, item }, done];
}

/** The event that ends a stream, for a response that has ended. */
export function endEvent(state: ResponseState, output: OutputItem[]): StreamEvent {
  const type = state.status === "completed" ? "response.completed" : state.status === "failed" ? "response.failed" : "response.incomplete";
  return { type, response: responseObject(state, output) };
}

/** OpenAI's error body: what was wrong, and its kind. */
export function errorBody(status: number, message: string): { error: { message: string; type: string; param: null; code: string | null } } {
  const type = status === 401 ? "authentication_error" : status === 403 ? "permission_error" : status === 404 ? "not_found_error" : status < 500 ? "invalid_request_error" : "server_error";
  return { error: { message, type, param: null, code: status === 404 ? "not_found" : null } };
}

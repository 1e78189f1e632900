// ModelJob: the named interface between the object and the model queue consumer.
import type { AssistantMessage, Message } from "@mariozechner/pi-ai";
import type { ModelTool } from "../plugins/index.ts";
import type { Route } from "./chat.ts";

/** The queue message: only ids, the consumer reads the request from the object. */
export interface ModelJobMessage extends Route {
  jobId: string;
}

export interface ModelRequest {
  systemPrompt: string;
  messages: Message[];
  tools: ModelTool[];
}

export type ModelOutcome =
  | { ok: true; message: AssistantMessage }
  /** The provider refused the request, or the queue gave up: the turn fails with this sentence. */
  | { ok: false; error: string };

// ModelJob: the named interface between the object and whoever calls the
// provider (a courier): the request it reads, and the outcome it reports.
import type { AssistantMessage, Message } from "@mariozechner/pi-ai";
import type { ModelTool } from "../plugins/index.ts";

export interface ModelRequest {
  systemPrompt: string;
  messages: Message[];
  tools: ModelTool[];
}

/** One provider call's outcome, as the courier reports it; the object decides what follows. */
export type ProviderCall =
  | { kind: "reply"; message: AssistantMessage }
  /** The provider refused the request itself (or it cannot be sent): retrying cannot help. */
  | { kind: "refused"; error: string }
  /** A failure worth another try (429, 5xx, network, timeout). */
  | { kind: "retry"; error: string };

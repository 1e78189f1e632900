// ModelJob: the named interface between the object and whoever calls the
// provider (a courier): the request it reads; the outcome it reports is a
// ProviderCall (runtime/models).
import type { Message } from "@mariozechner/pi-ai";
import type { ModelTool } from "../../plugins/index.ts";
import type { HourBusy } from "../metering/index.ts";
import type { StreamTarget } from "../chat.ts";
import type { ModelPick } from "./types.ts";

export interface ModelRequest {
  /** The model chosen for this call (deployment, tenant or agent), resolved by the courier. */
  model: ModelPick;
  systemPrompt: string;
  messages: Message[];
  tools: ModelTool[];
  /** A child run's call (runtime/turns/delegation.ts): its ledger row says so. */
  child?: true;
}

/**
 * A model job's work for its courier: the request (a ModelRequest as JSON
 * text, as the job row keeps it), the object's busy time per hour for the
 * ledger, where to stream the reply's text (when streaming is on and the
 * platform can), and whether the conversation's Responses streams hear it.
 */
export interface ModelWork {
  request: string;
  busy: HourBusy[];
  stream?: StreamTarget;
  /** The call writes a turn's reply (not a compaction's summary): its courier tells the conversation's Responses streams the text as it comes. */
  followed?: true;
}

/** The outbox's ref key of the message a job's reply is streamed to. */
export const streamKey = (jobId: string) => `reply:${jobId}`;

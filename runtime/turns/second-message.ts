// What a person's second message does while the agent is still answering the
// first (LangGraph's "double-texting"), chosen per agent (runtime/control/settings.ts).
import * as z from "zod";

export const SECOND_MESSAGE_STRATEGIES = ["steer", "queue", "interrupt", "reject"] as const;

/**
 * `steer`: read by the model before its next call (the default). `queue`:
 * answered in a turn of its own once the current one ends. `interrupt`: the
 * running turn stops and a new one answers everything said. `reject`: not
 * taken; the person is asked to send it again once the answer is done.
 */
export const secondMessageSchema = z.enum(SECOND_MESSAGE_STRATEGIES, {
  error: (issue) => `strategy must be one of ${SECOND_MESSAGE_STRATEGIES.join(", ")} (got ${JSON.stringify(issue.input)})`,
});
export type SecondMessage = z.infer<typeof secondMessageSchema>;

export const DEFAULT_SECOND_MESSAGE: SecondMessage = "steer";

/** What the person is told in the thread, by strategy (a steer says nothing: the answer shows it). */
export const SECOND_MESSAGE_NOTICES = {
  queue: "Queued: I'll answer this once I've finished the current answer.",
  reject: "I'm still working on your last message. Send this one again when I'm done.",
} as const;

/** Before the new turn of an `interrupt`: the model answers everything said, not only the last message. */
export const RESTART_NOTE =
  "The person sent another message before the previous answer was finished, so that answer was stopped. Answer taking into account everything they have said, including the messages before this note.";

/** The stopped turn's status line under `interrupt`. */
export const RESTARTED_STATUS = "Restarted: a new message came in.";

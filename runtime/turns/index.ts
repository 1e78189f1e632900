// The turns room: the turn state machine, compaction, the system prompt and
// the strategy for a second message while a turn runs.
export { DEFAULT_SECOND_MESSAGE, SECOND_MESSAGE_STRATEGIES, secondMessageSchema, type SecondMessage } from "./second-message.ts";
export { systemPrompt } from "./system-prompt.ts";
export { Turns } from "./turns.ts";
export type { Children, TurnOutcome } from "./children.ts";

// The turns room: the turn state machine, compaction, the system prompt, the
// strategy for a second message while a turn runs, and subagents (a parent's
// `delegate` call runs a child conversation of the same object).
export { DEFAULT_SECOND_MESSAGE, SECOND_MESSAGE_STRATEGIES, secondMessageSchema, type SecondMessage } from "./second-message.ts";
export { systemPrompt } from "./system-prompt.ts";
export { Turns } from "./turns.ts";
export type { Children, TurnOutcome } from "./children.ts";
export { CHILD_ID, DELEGATE } from "./delegate-tool.ts";
export { Delegation, type Family } from "./delegation.ts";
export { DELEGATIONS_TABLE } from "./schema.ts";

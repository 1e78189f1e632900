// The turns room: the turn state machine, compaction and the system prompt.
export { systemPrompt } from "./system-prompt.ts";
export { Turns } from "./turns.ts";

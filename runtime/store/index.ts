// The store room: the object's conversations, their append-only log and
// transcript, its SQLite schema and its identity (who it is, in its meta table).
export { type ConversationRow, Conversations, type DirectRule, type InboxItem, type TurnStart } from "./conversations.ts";
export { Identity } from "./identity.ts";
export { hasSchema, migrate } from "./schema.ts";
export { type CompactionData, type CompactionTrigger, type HandoverData, isMessageRow, type LogRow, type MarkerData, messageOf, modelMessages, RUNTIME_NOTE_PREFIX, shownRows, type StandingChange, type StandingData, textOf, transcript, type TranscriptEntry, type UserData } from "./transcript.ts";

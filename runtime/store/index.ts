// The store room: the object's conversations, their append-only log and
// transcript, and its SQLite schema.
export { audienceOf } from "./audience.ts";
export { type ConversationRow, Conversations, type InboxItem } from "./conversations.ts";
export { hasSchema, migrate } from "./schema.ts";
export { type CompactionData, type CompactionTrigger, type HandoverData, isMessageRow, type LogRow, type MarkerData, messageOf, modelMessages, RUNTIME_NOTE_PREFIX, shownRows, type StandingChange, type StandingData, textOf, transcript, type TranscriptEntry, type UserData } from "./transcript.ts";

// The store room: the object's conversations, their append-only log and
// transcript, the tables they live in and its identity (who it is, in its meta
// table), settled conversations archived to R2 and restored (retention), and
// pictures stored once per agent in R2 and read back within a model's window.
export { type ConversationRow, Conversations, currentTurn, type DirectRule, logRows, logRowsAt, type InboxItem, type TurnStart } from "./conversations.ts";
export { Identity } from "./identity.ts";
export { CONVERSATIONS_ARCHIVED, CONVERSATIONS_TABLE, INBOUND_TABLE, INBOX_TABLE, LOG_TABLE } from "./schema.ts";
export { type AwaitingData, type CompactionData, type CompactionTrigger, type HandoverData, isMessageRow, type LogRow, type MarkerData, messageOf, modelMessages, RUNTIME_NOTE_PREFIX, shownRows, type StandingChange, type StandingData, textOf, transcript, type TranscriptEntry, type UserData } from "./transcript.ts";
export { ARCHIVE_SLICE, archiveKey, type ConversationArchive, DEDUPE_WINDOW_MS, Retention } from "./archive.ts";
export { imageLimits, type ImageLimits, retentionMs } from "./config.ts";
export { isStoredImage, storeImage, type StoredImage } from "./pictures.ts";
export { leftOut, picturesIn } from "./picture-window.ts";
export { type ConversationQuery, conversationRows, logMark, type PageCursor, type PageRow } from "./page.ts";

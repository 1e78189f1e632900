// The retention room: settled conversations archived to R2 past RETENTION_DAYS
// and restored by a message, old inbound ids and settled sends deleted.
export { ARCHIVE_SLICE, archiveKey, type ConversationArchive, DEDUPE_WINDOW_MS, Retention } from "./archive.ts";
export { retentionMs } from "./config.ts";

// The edge room: how requests reach an agent (route checks, submitting an
// event, reading a conversation, the files a message brings), the Agents API
// routes and the ledgers' daily fold.
export { agentsApi, agentsApiDocs } from "./api.ts";
export { conversationId, tenantParams } from "./schemas.ts";
export { foldLedgers } from "./ledger-cron.ts";
export { changeSetting, secondMessageOf, setTenantLimit } from "./settings.ts";
export { CONVERSATION_ID, restoredError, parseRoute, readConversation, submitEvent, withStoredImages } from "./ingress.ts";
export { FETCH_DEADLINE_MS, FILE_ACCEPT, FILE_CAPS, FILE_NAME_MAX_CHARS, FILES_MAX_CHARS, FILES_MAX_COUNT, fetchFiles, type GivenFile, IMAGE_MAX_BYTES, readGivenFiles, type SharedFile, trustedUrl } from "./files.ts";

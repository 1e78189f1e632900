// The edge room: how requests reach an agent (route checks, submitting an
// event, reading a conversation), the Agents API routes and the ledgers' daily fold.
export { agentsApi, readJson } from "./api.ts";
export { adminToken } from "./config.ts";
export { foldLedgers } from "./ledger-cron.ts";
export { changeSetting, secondMessageOf } from "./settings.ts";
export { CONVERSATION_ID, meaningAgain, parseRoute, readConversation, submitEvent } from "./ingress.ts";

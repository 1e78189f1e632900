// The edge room: how requests reach an agent (route checks, submitting an
// event, reading a conversation) and the Agents API routes.
export { agentsApi } from "./api.ts";
export { adminToken } from "./config.ts";
export { CONVERSATION_ID, parseRoute, readConversation, submitEvent } from "./ingress.ts";

// The object room: the AgentObject (its RPC surface, the pass, the scheduler
// and acks first, inbound events, views, what `status` answers, an agent's
// deletion, the audit outbox of changes made in a chat) and how others reach it.
export { AgentObject, type ConversationView } from "./agent-object.ts";
export { agentStub } from "./agent-stub.ts";
export type { EffectReport, EffectWork, ReportAnswer } from "./claims.ts";
export { Inbound } from "./inbound.ts";
export { Scheduler } from "./scheduler.ts";
export { type ConversationPage, type ConversationQuery, conversationState, type ConversationState, type ConversationSummary, type PageCursor, type PendingApproval } from "./views.ts";
export { accepted, afterAccepts, ACCEPTS_FIRST_MAX_MS, ACK_PATIENCE_MS } from "./accepts-first.ts";
export { AgentDeletedError, AgentDeletion, type DeletionReport } from "./deletion.ts";
export type { AuditWork } from "./audit-outbox.ts";
export { migrate } from "./schema.ts";

// The object room: the AgentObject (its RPC surface, the pass, the scheduler,
// inbound events, views) and how others reach it.
export { AgentObject, type ConversationView } from "./agent-object.ts";
export { agentStub } from "./agent-stub.ts";
export type { EffectReport, EffectWork, ReportAnswer } from "./claims.ts";
export { Inbound } from "./inbound.ts";
export { Scheduler } from "./scheduler.ts";
export { type ConversationPage, type ConversationQuery, conversationState, type ConversationState, type ConversationSummary, type PageCursor, type PendingApproval } from "./views.ts";

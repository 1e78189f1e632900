// The runtime's public interface for the other folders (bridges, console) and the Worker entry.
export type {
  Attachment,
  ChatCommand,
  ChatEvent,
  ChatOutbound,
  ChatUser,
  ConversationStatus,
  DeliveryResult,
  OutboundMessage,
  OutboxDelivery,
  Platform,
  ReplyAddress,
  Route,
  StreamTarget,
  SubmitResult,
} from "./chat.ts";
export { CONVERSATION_ID, parseRoute, readConversation, submitEvent } from "./edge/ingress.ts";
export { agentStub } from "./object/agent-stub.ts";
export type { ConversationView } from "./object/agent-object.ts";
export { conversationState, type ConversationPage, type ConversationQuery, type ConversationState, type ConversationSummary, type PageCursor, type PendingApproval } from "./object/views.ts";
export type { AgentListing, DirectoryEntry, TenantListing } from "./control/directory.ts";
export { adminToken, sendTimeoutMs } from "./config.ts";
export { controlPlane, ControlPlane, listAgents, listTenants, recordAgent } from "./control/control-plane.ts";
export { AgentObject } from "./object/agent-object.ts";
export { agentsApi } from "./edge/api.ts";
export { consumeQueue, Courier } from "./courier/courier.ts";
export { Ledger, type UsageReport } from "./metering/ledger.ts";
export { readUsage, totalsOf, type UsageRead, type UsageTotals } from "./metering/usage-read.ts";
export type { RuntimeDeps } from "./deps.ts";

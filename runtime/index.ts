// The runtime's door for the other folders (bridges, console) and the Worker
// entry: the chat contract, and from each room what lies outside it needs.
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
  PaceHold,
  PaceRule,
  Platform,
  ReplyAddress,
  Route,
  RuntimeDeps,
  StreamTarget,
  SubmitResult,
  TypingSchedule,
} from "./chat.ts";
export { openingSince } from "./chat.ts";
export { AgentObject, agentStub, conversationState, type ConversationPage, type ConversationQuery, type ConversationState, type ConversationSummary, type ConversationView, type PageCursor, type PendingApproval } from "./object/index.ts";
export { consumeQueue, Courier, SendPace } from "./courier/index.ts";
export { agentsApi, agentsApiDocs, tenantParams, changeSetting, CONVERSATION_ID, FETCH_DEADLINE_MS, fetchFiles, FILE_ACCEPT, FILE_CAPS, FILE_NAME_MAX_CHARS, FILES_MAX_CHARS, FILES_MAX_COUNT, foldLedgers, IMAGE_MAX_BYTES, parseRoute, readConversation, readGivenFiles, secondMessageOf, setTenantLimit, type SharedFile, submitEvent, trustedUrl } from "./edge/index.ts";
export { isResponsesPath, openAIErrorBody, responsesRouteDocs, responsesRoutes } from "./responses/index.ts";
export { SECOND_MESSAGE_STRATEGIES, type SecondMessage } from "./turns/index.ts";
export { controlPlane, ControlPlane, deleteTenantRecord, deleteTenantSecret, putTenantRecord, tenantRecord, listAgents, listTenants, listTenantSecrets, peopleNames, PersonRoles, recordAgent, rememberPerson, rolesHeldBy, setTenantSecret, Tenant, tenantKeys, tenantRoles, type AgentListing, type DirectoryEntry, type KeyRow, type PersonName, type RoleRow, type SecretListing, type TenantListing } from "./control/index.ts";
export { Ledger, readUsage, totalsOf, unpricedModels, unpricedSentence, type UsageRead, type UsageReport, type UsageTotals } from "./metering/index.ts";
export { sendTimeoutMs } from "./effects/index.ts";
export { ProviderGate } from "./models/index.ts";
export { CHILD_ID } from "./turns/index.ts";
export { adminToken, callerOf, checkBounds, createTenantKey, newKeyBody, revokeTenantKey, setTenantBounds, setTenantRole, tenantBounds, tenantBoundsSchema, type TenantBounds, identitySchema, markAudited, PLATFORM_ACTOR, readAudit, recordChange, requireTenant, requireTenantAdmin, resolveCaller, tenantRoleSchema, clientOf, credentialFailed, credentialHeld, refuseWhileThrottled, deleteSecret, setSecret, secretBody, secretNameSchema, PLATFORM_TENANT, type Caller, type TenantRole } from "./access/index.ts";

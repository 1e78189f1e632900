// The runtime's public interface for the other folders (bridges, approvals, console).
export type {
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
  SubmitResult,
} from "./chat.ts";
export { agentStub, CONVERSATION_ID, parseRoute, readConversation, submitEvent } from "./ingress.ts";
export type { ConversationView } from "./agent-object.ts";
export { hmacHex, HttpError, isHttpsOrLoopback, parseJson, readBody, safeEqual, type BodyRules } from "./http.ts";
export { adminToken, baseUrlFrom, secretNamed, ConfigError } from "./config.ts";
export { controlPlane } from "./control-plane.ts";

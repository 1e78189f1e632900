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
export { agentStub, parseRoute, submitEvent } from "./ingress.ts";
export { HttpError, isHttpsOrLoopback, parseJson, readBody, safeEqual, type BodyRules } from "./http.ts";
export { baseUrlFrom, secretNamed, ConfigError } from "./config.ts";
export { controlPlane } from "./control-plane.ts";

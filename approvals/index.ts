// The approvals folder's public interface: policy, holds and the card model.
export { evaluatePolicy, mountPolicy, policyDecision, policyWarnings, type MountPolicy, type PolicyDecision, type MountUnderPolicy, type ToolUnderPolicy } from "./policy.ts";
export { HOLDS_SCHEMA, Holds, approversSchema, mayDecide, type HoldRow, type HoldStatus, type Person, type SettledStatus } from "./holds.ts";
export { cardFor, cardText, decisionValue, parseDecisionValue, type Card, type CardState } from "./card.ts";

// The approvals folder's public interface: holds, who may decide, and the card model.
export { Holds, holdRows, approversSchema, mayDecide, type HoldRow, type HoldStatus, type Person, type SettledStatus } from "./holds.ts";
export { cardFor, cardText, decisionValue, parseDecisionValue, type Card, type CardState } from "./card.ts";
export { HOLDS_BY_CONVERSATION_INDEX, HOLDS_TABLE } from "./schema.ts";

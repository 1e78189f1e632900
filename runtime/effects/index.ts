// The effects room: what the object needs done elsewhere, as rows next to the
// state that produced them (effects, the chat outbox, the typing indicator).
export { deadlineMs, leaseSeconds, sendTimeoutMs, streamReplies } from "./config.ts";
export { courierName, modelLane, toCouriers, type Dispatch, type EffectCarriers, type EffectKind, type EffectMessage, type EffectRow, Effects, SEND_LEASE_MS } from "./effects.ts";
export { Outbox, outboxRows, type RunDelivery, type RunResults, type SendRun } from "./outbox.ts";
export { Typing, TYPING_REFRESH_MS } from "./typing.ts";
export { EFFECTS_TABLE, EFFECTS_WORK_OUTBOX_RUNS, MESSAGE_REFS_SHOWN, MESSAGE_REFS_TABLE, OUTBOX_REFS_INDEX, OUTBOX_SETTLED_INDEX, OUTBOX_TABLE, OUTBOX_UPDATES_INDEX } from "./schema.ts";

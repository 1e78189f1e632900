// The metering room: the object's busy time, the usage ledgers, the spend
// check and the count around each provider call, and reading usage back.
export { AGENT_HANDLERS, BusyTime, busyTurnRows, type ConversationLookup, type HourBusy, measureHandlers, type TurnBusy } from "./busy-time.ts";
export { platformDailySpendLimit } from "./config.ts";
export { DAY_MS, dayStart, FOLD_AFTER_MS, Ledger, ledgerStub, SPEND_REPORT_EVERY_MS, tenantLimitSchema, type TenantLimit, type MachineRowOut, type UsageReport, type UsageRowOut } from "./ledger.ts";
export { countHeld, countJob, effectiveLimit, type PaidAnswer, forgetReading, limitSentence, spendRefusal } from "./spend.ts";
export { readUsage, tenantDayLine, tokensText, totalsOf, type UsageRead, type UsageTotals } from "./usage-read.ts";
export { unpricedModels, unpricedSentence, usageRow } from "./usage.ts";
export { BUSY_OUTSIDE_TABLE, BUSY_TIME_TABLES } from "./schema.ts";

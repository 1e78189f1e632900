// The tools room: the tool-call journal, discovered tool lists, code mode's
// calls on the object's side, mount sessions and the approvals glue.
export { ApprovalFlow } from "./approval-flow.ts";
export { MountSessions, sessionCopy } from "./mount-sessions.ts";
export { type ScriptAnswer, type ScriptCall, ScriptCalls } from "./script-calls.ts";
export { type CallerAnswer, type Delegations, ToolCalls, toolCallRows, toolCalls, toolResult, type ToolReport, type ToolWork } from "./tool-calls.ts";
export { type MountReport, type MountWork, ToolLists } from "./tool-lists.ts";
export { Leases, type LeaseReport, type LeaseUse, type LeaseWork } from "./leases.ts";
export { machineIdleMs } from "./config.ts";
export { LEASES_TABLE, MOUNT_SESSIONS_TABLE, TOOL_CALLS_RETENTION, TOOL_CALLS_TABLE } from "./schema.ts";

// The audit outbox room: a person's change made from a chat, kept with the
// change and carried to the control plane's trail exactly once.
export { AuditOutbox, type AuditWork } from "./audit-outbox.ts";

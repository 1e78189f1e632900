// The deletion room: an agent deleted through the Agents API stops, tells its
// chats, and takes no further step (runtime/deletion/deletion.ts).
export { AgentDeletedError, AgentDeletion, type DeletionReport } from "./deletion.ts";

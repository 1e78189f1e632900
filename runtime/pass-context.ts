// What a pass knows while it advances conversations: the agent's mounts and
// model as they are now. A leaf below the object's parts, so the turn machine,
// the tool calls and the approvals glue share it without importing each other.
import type { Gateway } from "../plugins/index.ts";
import type { Route } from "./chat.ts";
import type { ModelChoice, ModelPick } from "./models/index.ts";

/** What a pass knows while it advances conversations. */
export interface PassContext {
  route: Route;
  gateway: Gateway;
  /** The model chosen for this agent, as the jobs carry it, and resolved. */
  pick: ModelPick;
  model: ModelChoice;
  /** The agent's instructions (the standing documents follow them, per conversation). */
  systemPrompt: string;
  /** How long a leased mount's machine may go without a call (MACHINE_IDLE_MINUTES); null when no mount holds a lease. */
  machineIdleMs: number | null;
}

// What `status` answers in chat: the conversation's state, its usage today
// (from the object's own job rows) and, added at the ingress, the tenant's day
// from its ledger (runtime/metering/usage-read.ts; the object never reads another object).
import { policyWarnings, type Gateway } from "../../plugins/index.ts";
import type { ConversationStatus } from "../chat.ts";
import type { ConversationRow } from "../store/index.ts";
import type { JobUsage, ModelChoice } from "../models/index.ts";
import { tokensText, unpricedSentence } from "../metering/index.ts";

export interface StatusFacts {
  conv: ConversationRow;
  status: ConversationStatus;
  openJobs: number;
  pendingHolds: number;
  /** The agent's open machines (runtime/tools/leases.ts), each ending at `expiresAt` at the latest without a call. */
  machines: { alias: string; conversation: string; expiresAt: number }[];
  /** The conversation's day (UTC) so far: its model jobs' usage and the object's busy time on it. */
  today: JobUsage & { busyMs: number };
  /** The mounts as they are; one that cannot be read is itself worth a warning. */
  gateway: () => Gateway;
  /** The agent's model as it is now; one that cannot be resolved is said so. */
  model: () => ModelChoice;
}

export function statusText(f: StatusFacts): string {
  const { conv } = f;
  let gateway: Gateway | null;
  try {
    gateway = f.gateway();
  } catch {
    gateway = null;
  }
  const d = f.today;
  const today = `${d.calls} model calls, ${tokensText(d.input, d.cached, d.output)}, $${d.cost.toFixed(4)}, object busy ${Math.round(d.busyMs)} ms`;
  const total = `${conv.input_tokens} tokens in, ${conv.output_tokens} out, $${conv.cost.toFixed(4)}`;
  const error = conv.status === "failed" && conv.error ? ` Last error: ${conv.error}` : "";
  const warnings = gateway ? policyWarnings(gateway.mountsUnderPolicy()).map((w) => `\nWarning: ${w}.`) : ["\nWarning: the mounts could not be read."];
  const tools = gateway ? gateway.toolNotes().map((note) => `\n${note}`) : [];
  return (
    `Status: ${f.status} (turn ${conv.turn}). Open model jobs for this agent: ${f.openJobs}. ` +
    `Calls waiting for approval: ${f.pendingHolds}. This conversation today (UTC): ${today}; in all: ${total}.${error}${machinesLine(f)}${modelLine(f.model)}${warnings.join("")}${tools.join("")}`
  );
}

/** The agent's open machines: whose, and how long each has left without a call. */
function machinesLine({ machines, conv }: StatusFacts): string {
  if (machines.length === 0) return "";
  const each = machines.map((m) => `${m.alias} of ${m.conversation === conv.id ? "this conversation" : `conversation ${m.conversation}`} (${Math.max(0, Math.ceil((m.expiresAt - Date.now()) / 60_000))} min left without a call)`);
  return `\nOpen machines: ${each.join(", ")}.`;
}

/** The agent's model, and a warning when it has no price (its spend is not limited). */
function modelLine(model: () => ModelChoice): string {
  let choice: ModelChoice;
  try {
    choice = model();
  } catch (err) {
    return `\nWarning: the model cannot be used: ${err instanceof Error ? err.message : String(err)}.`;
  }
  if (choice.kind === "local") return "\nModel: the built-in local model.";
  const name = `${choice.provider.id}/${choice.model}`;
  const { input, output, cacheRead, cacheWrite } = choice.settings.cost;
  const unpriced = input + output + cacheRead + cacheWrite === 0 ? `\nWarning: ${unpricedSentence(name)}.` : "";
  return `\nModel: ${name}${choice.byok ? " (on the tenant's own key)" : ""}.${unpriced}`;
}

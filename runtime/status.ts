// What `status` answers in chat: the conversation's state, its usage today
// (from the object's own job rows) and, added at the ingress, the tenant's day
// from its ledger (the object never reads another object).
import { policyWarnings, type Gateway } from "../plugins/index.ts";
import type { ConversationStatus } from "./chat.ts";
import type { ConversationRow } from "./conversations.ts";
import { dayStart } from "./ledger.ts";
import { readUsage, totalsOf } from "./usage-api.ts";

export interface StatusFacts {
  conv: ConversationRow;
  status: ConversationStatus;
  openJobs: number;
  pendingHolds: number;
  /** The mounts as they are; one that cannot be read is itself worth a warning. */
  gateway: () => Gateway;
}

type DayRow = { calls: number; input: number; cached: number; output: number; cost: number; busy: number };

/** The conversation's day (UTC) so far: its model jobs' usage and the object's busy time on it. */
function conversationDay(sql: SqlStorage, conversation: string): DayRow {
  const day = dayStart(Date.now());
  const jobs = sql
    .exec<Omit<DayRow, "busy">>(
      "SELECT COUNT(model) AS calls, COALESCE(SUM(input_tokens), 0) AS input, COALESCE(SUM(cache_read_tokens), 0) AS cached, COALESCE(SUM(output_tokens), 0) AS output, COALESCE(SUM(cost), 0) AS cost FROM model_jobs WHERE conversation = ? AND created_at >= ? AND model IS NOT NULL",
      conversation,
      day,
    )
    .one();
  const busy = sql.exec<{ busy: number }>("SELECT COALESCE(SUM(busy_ms), 0) AS busy FROM busy_turns WHERE conversation = ? AND at >= ?", conversation, day).one().busy;
  return { ...jobs, busy };
}

function tokens(input: number, cached: number, output: number): string {
  const prompt = input + cached;
  const share = prompt > 0 ? ` (${Math.round((100 * cached) / prompt)}% cached)` : "";
  return `${prompt} tokens in${share}, ${output} out`;
}

export function statusText(sql: SqlStorage, f: StatusFacts): string {
  const { conv } = f;
  let gateway: Gateway | null;
  try {
    gateway = f.gateway();
  } catch {
    gateway = null;
  }
  const d = conversationDay(sql, conv.id);
  const today = `${d.calls} model calls, ${tokens(d.input, d.cached, d.output)}, $${d.cost.toFixed(4)}, object busy ${Math.round(d.busy)} ms`;
  const total = `${conv.input_tokens} tokens in, ${conv.output_tokens} out, $${conv.cost.toFixed(4)}`;
  const error = conv.status === "failed" && conv.error ? ` Last error: ${conv.error}` : "";
  const warnings = gateway ? policyWarnings(gateway.mountsUnderPolicy()).map((w) => `\nWarning: ${w}.`) : ["\nWarning: the mounts could not be read."];
  const tools = gateway ? gateway.toolNotes().map((note) => `\n${note}`) : [];
  return (
    `Status: ${f.status} (turn ${conv.turn}). Open model jobs for this agent: ${f.openJobs}. ` +
    `Calls waiting for approval: ${f.pendingHolds}. This conversation today (UTC): ${today}; in all: ${total}.${error}${warnings.join("")}${tools.join("")}`
  );
}

/** The tenant's day (UTC) from its ledger, as a line for `status`; a ledger out of reach is said so. */
export async function tenantDayLine(env: Env, tenant: string): Promise<string> {
  try {
    const { report, reading, effective: limit } = await readUsage(env, tenant, dayStart(Date.now()), Date.now() + 1);
    const t = totalsOf(report);
    const spend = limit.exempt ? "(exempt from limits)" : limit.dailyUsd === null ? "(no daily limit)" : `of a $${limit.dailyUsd.toFixed(2)} daily limit`;
    const byok = t.byokCostUsd > 0 ? ` ($${t.byokCostUsd.toFixed(4)} of it on the tenant's own key)` : "";
    return `Tenant ${tenant} today (UTC): ${t.calls} model calls, ${tokens(t.inputTokens, t.cachedInputTokens, t.outputTokens)}, $${t.costUsd.toFixed(4)}${byok}; spent $${reading.spentUsd.toFixed(4)} ${spend}; object busy ${Math.round(t.busyMs)} ms.`;
  } catch (err) {
    console.error(`status: the ledger of tenant ${tenant} could not be read`, err);
    return `Tenant ${tenant} today: the usage ledger could not be read.`;
  }
}

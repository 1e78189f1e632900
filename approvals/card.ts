// The platform-neutral approval card. Bridges render it (Slack Block Kit,
// Discord components, webhook JSON); the runtime posts it and updates it in place.
import type { HoldRow } from "./holds.ts";

export type CardState = "pending" | "approved" | "denied" | "expired" | "performed" | "failed" | "refused" | "unknown";

export interface Card {
  holdId: string;
  state: CardState;
  /** What is asked, in a sentence. */
  title: string;
  tool: string;
  /** The call's arguments verbatim (pretty JSON), with any secret value removed. */
  arguments: string;
  requestedBy: string;
  expiresAt: number;
  decidedBy?: string;
  decidedAt?: number;
  /** What happened, once something did. */
  outcome?: string;
  /** Button values, present only while a decision is possible. */
  actions?: { approve: string; deny: string };
}

const VALUE_PREFIX = "hold";

/**
 * A button value binds the hold to its tenant and agent, so a value copied
 * into another workspace is refused rather than acted on.
 */
export function decisionValue(tenant: string, agent: string, holdId: string, approve: boolean): string {
  return [VALUE_PREFIX, approve ? "approve" : "deny", tenant, agent, holdId].join(":");
}

export function parseDecisionValue(value: string): { tenant: string; agent: string; holdId: string; approve: boolean } | null {
  const parts = value.split(":");
  if (parts.length !== 5 || parts[0] !== VALUE_PREFIX) return null;
  const [, verdict, tenant, agent, holdId] = parts as [string, string, string, string, string];
  if ((verdict !== "approve" && verdict !== "deny") || !tenant || !agent || !holdId) return null;
  return { tenant, agent, holdId, approve: verdict === "approve" };
}

const TITLES: Record<CardState, string> = {
  pending: "Approval needed",
  approved: "Approved — performing",
  denied: "Denied",
  expired: "Expired",
  performed: "Approved and performed",
  failed: "Approved, but the call failed",
  refused: "Approved, but refused by policy",
  unknown: "Approved — outcome unknown",
};

export function cardFor(hold: HoldRow, tenant: string, agent: string): Card {
  const state = hold.status === "running" ? "approved" : hold.status;
  return {
    holdId: hold.id,
    state,
    title: `${TITLES[state]}: ${hold.tool}`,
    tool: hold.tool,
    arguments: JSON.stringify(JSON.parse(hold.args), null, 2),
    requestedBy: hold.requested_by,
    expiresAt: hold.expires_at,
    decidedBy: hold.decided_by ?? undefined,
    decidedAt: hold.decided_at ?? undefined,
    outcome: hold.outcome ?? undefined,
    actions:
      state === "pending"
        ? { approve: decisionValue(tenant, agent, hold.id, true), deny: decisionValue(tenant, agent, hold.id, false) }
        : undefined,
  };
}

/** Plain text for a card: the fallback text of a chat message and the console. */
export function cardText(card: Card): string {
  const lines = [`${card.title}`, `Requested by ${card.requestedBy}`, "```", card.arguments, "```"];
  if (card.state === "pending") lines.push(`Expires ${new Date(card.expiresAt).toISOString()}`);
  if (card.decidedBy) lines.push(`Decided by ${card.decidedBy} at ${new Date(card.decidedAt ?? 0).toISOString()}`);
  if (card.outcome) lines.push(card.outcome);
  return lines.join("\n");
}

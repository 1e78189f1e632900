// An approval card as JSON: what is asked, its state, and while pending, the
// actions whose value the peer sends back as a decision event.
import type { Card } from "../../approvals/index.ts";

export function cardJson(card: Card) {
  return {
    hold_id: card.holdId,
    state: card.state,
    title: card.title,
    tool: card.tool,
    arguments: card.arguments,
    requested_by: card.requestedBy,
    expires_at: new Date(card.expiresAt).toISOString(),
    decided_by: card.decidedBy ?? null,
    outcome: card.outcome ?? null,
    actions: card.actions
      ? [
          { action: "approve", label: "Approve", value: card.actions.approve },
          { action: "deny", label: "Deny", value: card.actions.deny },
        ]
      : [],
  };
}

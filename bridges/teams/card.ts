// An approval card as an Adaptive Card: its text, and while a decision is
// possible Approve and Deny as Action.Execute (Teams' Universal Actions), whose
// data carries the card's decision value (bound to the tenant and agent). A
// click comes back as an adaptiveCard/action invoke, answered with the card as
// it now stands, so it is updated in place; an Action.Submit from a card of
// an older client comes back as a message with the same data in its value.
import * as z from "zod";
import { cardText, type Card } from "../../approvals/index.ts";
import { clip } from "../../lib/text.ts";

/** A message's text; Teams takes about 28 KB of activity, so a reply is split well under it. */
export const TEAMS_MESSAGE_LIMIT = 8000;
export const ADAPTIVE_CARD = "application/vnd.microsoft.card.adaptive";

/** What a card's button carries back. */
export const actionDataSchema = z.looseObject({ holdDecision: z.string().min(1).max(600) });

export function adaptiveCard(card: Card): Record<string, unknown> {
  const actions = card.actions
    ? [
        { type: "Action.Execute", title: "Approve", verb: "approve", style: "positive", data: { holdDecision: card.actions.approve } },
        { type: "Action.Execute", title: "Deny", verb: "deny", style: "destructive", data: { holdDecision: card.actions.deny } },
      ]
    : [];
  return {
    type: "AdaptiveCard",
    $schema: "http://adaptivecards.io/schemas/adaptive-card.json",
    version: "1.4",
    body: [{ type: "TextBlock", text: clip(cardText(card), TEAMS_MESSAGE_LIMIT), wrap: true }],
    actions,
  };
}

/** The card as a message's attachment. */
export const cardAttachment = (card: Card) => ({ contentType: ADAPTIVE_CARD, content: adaptiveCard(card) });

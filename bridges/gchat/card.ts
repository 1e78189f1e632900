// An approval card as a Google Chat message: Cards v2, its text and, while a
// decision is possible, Approve and Deny buttons. A button's action carries
// the card's decision value whole (it binds tenant, agent and hold; the
// object refuses one bound elsewhere) as the parameter `decision`, which a
// CARD_CLICKED event brings back.
import { cardText, type Card } from "../../approvals/index.ts";
import { clip } from "../../lib/text.ts";

/** A message's text is at most 4,096 characters. */
export const GCHAT_MESSAGE_LIMIT = 4096;
/** The action's function name; Chat sends it back as the click's actionMethodName (or invokedFunction). */
export const DECIDE_FUNCTION = "antiproton.decide";
export const DECISION_PARAMETER = "decision";

const button = (text: string, value: string) => ({ text, onClick: { action: { function: DECIDE_FUNCTION, parameters: [{ key: DECISION_PARAMETER, value }] } } });

/** The card message's body: its text as a paragraph, with buttons while it is pending (updated, they are gone). */
export function cardMessage(card: Card): { fallbackText: string; cardsV2: unknown[] } {
  const text = clip(cardText(card), GCHAT_MESSAGE_LIMIT);
  // A text paragraph reads a few HTML tags: the card's text is shown as written.
  const widgets: unknown[] = [{ textParagraph: { text: text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;") } }];
  if (card.actions) widgets.push({ buttonList: { buttons: [button("Approve", card.actions.approve), button("Deny", card.actions.deny)] } });
  return { fallbackText: text, cardsV2: [{ cardId: `hold-${card.holdId}`, card: { sections: [{ widgets }] } }] };
}

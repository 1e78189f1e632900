// An approval card as a Discord message: its text, and while a decision is
// possible, Approve and Deny buttons whose custom_id is the card's decision value.
import { cardText, type Card } from "../../approvals/index.ts";

const ACTION_ROW = 1;
const BUTTON = 2;
const SUCCESS = 3;
const DANGER = 4;
const CONTENT_LIMIT = 2000;

export interface DiscordMessageBody {
  content: string;
  /** Absent: leave the message's components as they are; [] removes them. */
  components?: unknown[];
}

export function cardMessage(card: Card): DiscordMessageBody {
  const text = cardText(card);
  const content = text.length <= CONTENT_LIMIT ? text : `${text.slice(0, CONTENT_LIMIT - 1)}…`;
  const components = card.actions
    ? [
        {
          type: ACTION_ROW,
          components: [
            { type: BUTTON, style: SUCCESS, label: "Approve", custom_id: card.actions.approve },
            { type: BUTTON, style: DANGER, label: "Deny", custom_id: card.actions.deny },
          ],
        },
      ]
    : [];
  return { content, components };
}

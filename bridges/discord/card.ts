// An approval card as a Discord message: its text, and while a decision is
// possible, Approve and Deny buttons whose custom_id is the card's decision value.
import type { ButtonStyle, ComponentType, RESTPostAPIChannelMessageJSONBody } from "discord-api-types/v10";
import { cardText, type Card } from "../../approvals/index.ts";
import { clip } from "../../lib/text.ts";

// Typed as discord-api-types' enum members (types only: nothing is bundled).
const ACTION_ROW: ComponentType.ActionRow = 1;
const BUTTON: ComponentType.Button = 2;
const SUCCESS: ButtonStyle.Success = 3;
const DANGER: ButtonStyle.Danger = 4;

/** A message's content is at most 2,000 characters. */
export const DISCORD_MESSAGE_LIMIT = 2000;

/** What we post or edit: the same fields for a channel message and an interaction webhook's. Absent components leave them as they are; [] removes them. */
export type DiscordMessageBody = Pick<RESTPostAPIChannelMessageJSONBody, "content" | "components">;

export function cardMessage(card: Card): DiscordMessageBody {
  const components: DiscordMessageBody["components"] = card.actions
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
  return { content: clip(cardText(card), DISCORD_MESSAGE_LIMIT), components };
}

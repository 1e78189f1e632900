// An approval card in Block Kit: what is asked, the call's arguments, its
// state, and while a decision is possible, Approve and Deny buttons whose
// values (approvals' decisionValue) say what they decide.
import type { ActionsBlock, KnownBlock } from "@slack/types";
import { cardText, type Card } from "../../approvals/index.ts";
import { clip } from "../../lib/text.ts";
import { SLACK_TEXT_LIMIT, toMrkdwn } from "./mrkdwn.ts";

const APPROVE_ACTION = "antiproton_approve";
const DENY_ACTION = "antiproton_deny";
/** Slack's limits: header text 150, section text 3000 characters. */
const HEADER_LIMIT = 150;
const SECTION_LIMIT = 3000;

function decisionButtons(actions: NonNullable<Card["actions"]>): ActionsBlock {
  return {
    type: "actions",
    elements: [
      { type: "button", action_id: APPROVE_ACTION, style: "primary", text: { type: "plain_text", text: "Approve" }, value: actions.approve },
      { type: "button", action_id: DENY_ACTION, style: "danger", text: { type: "plain_text", text: "Deny" }, value: actions.deny },
    ],
  };
}

export function cardBlocks(card: Card): KnownBlock[] {
  const details = [`Requested by ${card.requestedBy}`];
  if (card.state === "pending") details.push(`Expires ${new Date(card.expiresAt).toISOString()}`);
  if (card.decidedBy) details.push(`Decided by ${card.decidedBy}`);
  const blocks: KnownBlock[] = [
    { type: "header", text: { type: "plain_text", text: clip(card.title, HEADER_LIMIT) } },
    { type: "section", text: { type: "mrkdwn", text: clip(toMrkdwn(`\`${card.tool}\`\n\`\`\`\n${card.arguments}\n\`\`\``), SECTION_LIMIT) } },
    { type: "context", elements: [{ type: "mrkdwn", text: toMrkdwn(details.join(" · ")) }] },
  ];
  if (card.outcome) blocks.push({ type: "section", text: { type: "mrkdwn", text: clip(toMrkdwn(card.outcome), SECTION_LIMIT) } });
  if (card.actions) blocks.push(decisionButtons(card.actions));
  return blocks;
}

/** The card as notification and fallback text. */
export function cardFallback(card: Card): string {
  return clip(toMrkdwn(cardText(card)), SLACK_TEXT_LIMIT);
}

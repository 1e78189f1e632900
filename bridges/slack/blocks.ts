// Block Kit for the status message and approval cards. Slack does not allow
// slash commands inside threads, so the Stop button on the status message is
// how a thread stops its turn.
import { cardText, type Card } from "../../approvals/index.ts";
import type { Route } from "../../runtime/index.ts";
import { SLACK_TEXT_LIMIT, toMrkdwn } from "./mrkdwn.ts";

export const STOP_ACTION = "antiproton_stop";
/** A card's buttons; their values (approvals' decisionValue) say what they decide. */
const APPROVE_ACTION = "antiproton_approve";
const DENY_ACTION = "antiproton_deny";
/** Slack's limits: header text 150, section text 3000 characters. */
const HEADER_LIMIT = 150;
const SECTION_LIMIT = 3000;

export type StatusState = "working" | "done" | "stopped" | "failed";

const STATE_EMOJI: Record<StatusState, string> = {
  working: ":hourglass_flowing_sand:",
  done: ":white_check_mark:",
  stopped: ":octagonal_sign:",
  failed: ":x:",
};

/** What a Stop button names: the object and the conversation to interrupt. */
export interface StopTarget {
  tenant: string;
  agent: string;
  conversation: string;
}

export function stopValue(route: Route, conversation: string): string {
  return JSON.stringify({ t: route.tenant, a: route.agent, c: conversation });
}

export function parseStopValue(value: string | undefined): StopTarget | null {
  try {
    const v = JSON.parse(value ?? "") as { t?: unknown; a?: unknown; c?: unknown };
    if (typeof v.t === "string" && typeof v.a === "string" && typeof v.c === "string") return { tenant: v.t, agent: v.a, conversation: v.c };
  } catch {
    // not ours
  }
  return null;
}

export function statusText(state: StatusState, text: string): string {
  return `${STATE_EMOJI[state]} ${text}`;
}

/** The status message: its state, and while the turn runs, a Stop button. */
export function statusBlocks(state: StatusState, mrkdwn: string, stop: string): unknown[] {
  const blocks: unknown[] = [{ type: "context", elements: [{ type: "mrkdwn", text: statusText(state, mrkdwn) }] }];
  if (state === "working") {
    blocks.push({
      type: "actions",
      elements: [{ type: "button", action_id: STOP_ACTION, style: "danger", text: { type: "plain_text", text: "Stop" }, value: stop }],
    });
  }
  return blocks;
}

function clip(text: string, limit: number): string {
  return text.length <= limit ? text : `${text.slice(0, limit - 1)}…`;
}

/** An approval card: what is asked, the call's arguments, its state, and while pending, Approve and Deny. */
export function cardBlocks(card: Card): unknown[] {
  const details = [`Requested by ${card.requestedBy}`];
  if (card.state === "pending") details.push(`Expires ${new Date(card.expiresAt).toISOString()}`);
  if (card.decidedBy) details.push(`Decided by ${card.decidedBy}`);
  const blocks: unknown[] = [
    { type: "header", text: { type: "plain_text", text: clip(card.title, HEADER_LIMIT) } },
    { type: "section", text: { type: "mrkdwn", text: clip(toMrkdwn(`\`${card.tool}\`\n\`\`\`\n${card.arguments}\n\`\`\``), SECTION_LIMIT) } },
    { type: "context", elements: [{ type: "mrkdwn", text: toMrkdwn(details.join(" · ")) }] },
  ];
  if (card.outcome) blocks.push({ type: "section", text: { type: "mrkdwn", text: clip(toMrkdwn(card.outcome), SECTION_LIMIT) } });
  if (card.actions) {
    blocks.push({
      type: "actions",
      elements: [
        { type: "button", action_id: APPROVE_ACTION, style: "primary", text: { type: "plain_text", text: "Approve" }, value: card.actions.approve },
        { type: "button", action_id: DENY_ACTION, style: "danger", text: { type: "plain_text", text: "Deny" }, value: card.actions.deny },
      ],
    });
  }
  return blocks;
}

/** The card as notification and fallback text. */
export function cardFallback(card: Card): string {
  return clip(toMrkdwn(cardText(card)), SLACK_TEXT_LIMIT);
}

// The turn's status message: its state, and while the turn runs, a Stop
// button. Slack does not allow slash commands inside threads, so the button is
// how a thread stops its turn; its value names the object and conversation.
import type { KnownBlock } from "@slack/types";
import type { Route } from "../../runtime/index.ts";

export const STOP_ACTION = "antiproton_stop";
/**
 * A conversation's status message (and cards) change at most once a second:
 * chat.update is a tier 3 method (about 50 a minute per workspace), and a turn
 * calling tools in quick succession would otherwise spend it in seconds.
 */
export const UPDATE_SPACING_MS = 1000;
/** Slack's limit for the text of a context element. */
export const STATUS_LIMIT = 3000;

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

export function statusText(state: StatusState, mrkdwn: string): string {
  return `${STATE_EMOJI[state]} ${mrkdwn}`;
}

export function statusBlocks(state: StatusState, mrkdwn: string, stop: string): KnownBlock[] {
  const blocks: KnownBlock[] = [{ type: "context", elements: [{ type: "mrkdwn", text: statusText(state, mrkdwn) }] }];
  if (state === "working") {
    blocks.push({
      type: "actions",
      elements: [{ type: "button", action_id: STOP_ACTION, style: "danger", text: { type: "plain_text", text: "Stop" }, value: stop }],
    });
  }
  return blocks;
}

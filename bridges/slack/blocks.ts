// Block Kit for the status message, and the action ids the interactivity route
// understands. Slack does not allow slash commands inside threads, so the Stop
// button on the status message is how a thread stops its turn.
import type { Route } from "../../runtime/index.ts";

export const STOP_ACTION = "antiproton_stop";
/** Approval cards (approvals/) use these, with the hold id as the button's value. */
export const APPROVE_ACTION = "antiproton_approve";
export const DENY_ACTION = "antiproton_deny";

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

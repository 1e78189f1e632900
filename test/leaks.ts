// Where a secret could leak to in a turn: the agent's tables, the model
// requests, the chat, the log. Tests of invariant 5 look in all of them.
import { vi } from "vitest";
import { storedText } from "./agents.ts";
import { slackCalls } from "./bridges/slack/helpers.ts";
import { providerRequests } from "./support.ts";

/** Every console line from now on (vi.restoreAllMocks ends the capture). */
export function captureConsole(): string[] {
  const lines: string[] = [];
  for (const method of ["log", "info", "warn", "error", "debug"] as const) {
    vi.spyOn(console, method).mockImplementation((...args: unknown[]) => void lines.push(args.map(String).join(" ")));
  }
  return lines;
}

/** Each of `forms` (a secret, as it may be encoded) found in a Slack turn's places, by place. */
export async function secretLeaks(forms: string[], turn: { tenant: string; agent: string; scenario: string; channel: string; lines: string[] }) {
  const found = (text: string) => forms.filter((f) => text.includes(f));
  return {
    tables: found(await storedText(turn.tenant, turn.agent)),
    modelRequests: found(JSON.stringify(await providerRequests(turn.scenario))),
    chat: found(JSON.stringify(await slackCalls(turn.channel))),
    logs: found(turn.lines.join("\n")),
  };
}

export const NO_LEAKS = { tables: [], modelRequests: [], chat: [], logs: [] };

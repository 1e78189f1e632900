// The app's Home tab: what the agent is for, the approvals waiting for this
// person, and how to start. Published with views.publish when the person opens
// the tab (app_home_opened), after Slack has its answer: the view is the
// person's own, so it is built for them each time.
import type { KnownBlock } from "@slack/types";
import { agentStub, type PendingApproval, type Route } from "../../runtime/index.ts";
import { clip } from "../../lib/text.ts";
import { homeDescription, routeFor } from "./config.ts";
import { botTokenFor } from "./installations.ts";
import { toMrkdwn } from "./mrkdwn.ts";
import { callSlack } from "./web-api.ts";

/** Slack's limits: a section's text 3,000 characters, a view 100 blocks (a few are ours). */
const SECTION_LIMIT = 3000;
const MAX_APPROVALS_SHOWN = 20;
const ARGUMENTS_SHOWN = 500;

/** What the agent is for: SLACK_HOME_DESCRIPTION, else a sentence naming it. */
export function agentDescription(env: Env, route: Route): string {
  return homeDescription(env) ?? `*${route.agent}* is an AI agent that works in this workspace: it answers in channels where it is mentioned and in direct messages, uses its tools, and asks before risky calls.`;
}

const section = (mrkdwn: string): KnownBlock => ({ type: "section", text: { type: "mrkdwn", text: clip(mrkdwn, SECTION_LIMIT) } });

/** Where the card of a pending approval is: the conversation's channel (`<tenant>:<channel>:<thread>`). */
function whereIs(approval: PendingApproval): string {
  const channel = approval.conversation.split(":")[1] ?? "";
  if (channel.startsWith("D")) return "in your direct messages with me";
  return /^[CG][A-Z0-9]+$/.test(channel) ? `in <#${channel}>` : "where it was asked";
}

export function homeBlocks(env: Env, route: Route, approvals: PendingApproval[]): KnownBlock[] {
  const blocks: KnownBlock[] = [
    { type: "header", text: { type: "plain_text", text: clip(route.agent, 150) } },
    section(agentDescription(env, route)),
    { type: "divider" },
    { type: "header", text: { type: "plain_text", text: "Waiting for your approval" } },
  ];
  if (approvals.length === 0) blocks.push(section("Nothing is waiting for you."));
  for (const { card, ...approval } of approvals.slice(0, MAX_APPROVALS_SHOWN)) {
    const args = toMrkdwn(`\`\`\`\n${clip(card.arguments, ARGUMENTS_SHOWN)}\n\`\`\``);
    blocks.push(section(`*${toMrkdwn(card.title)}*\nRequested by ${toMrkdwn(card.requestedBy)}, ${whereIs({ card, ...approval })}; approve or deny it on its card there.\n${args}`));
    blocks.push({ type: "context", elements: [{ type: "mrkdwn", text: `Expires <!date^${Math.floor(card.expiresAt / 1000)}^{date_short_pretty} {time}|${new Date(card.expiresAt).toISOString()}>` }] });
  }
  if (approvals.length > MAX_APPROVALS_SHOWN) blocks.push(section(`…and ${approvals.length - MAX_APPROVALS_SHOWN} more.`));
  blocks.push(
    { type: "divider" },
    { type: "header", text: { type: "plain_text", text: "How to start" } },
    section(
      [
        "• *Message me* in the Messages tab: our direct messages are one running conversation; reply in a thread to start a separate one.",
        "• *Mention me* in a channel (invite me first with `/invite`), then keep talking in the thread without mentioning me again.",
        "• While I work, a reply in the thread steers me; the *Stop* button on my status message stops me.",
        "• `/agent help` lists the commands.",
      ].join("\n"),
    ),
  );
  return blocks;
}

/**
 * Builds and publishes `user`'s Home tab. It runs after Slack has its answer,
 * so it never throws: a failure is logged.
 */
export async function publishHome(env: Env, tenant: string, user: string): Promise<void> {
  try {
    const route = routeFor(env, tenant);
    const approvals = await agentStub(env, route).pendingHolds(route, { platform: "slack", id: user });
    const token = await botTokenFor(env, tenant);
    if (!token) return console.error(`Slack Home for ${tenant}: no bot token`);
    const published = await callSlack(env, "views.publish", token, { user_id: user, view: { type: "home", blocks: homeBlocks(env, route, approvals) } });
    if (!published.ok) console.error(`Slack Home for ${tenant}: ${published.error}`);
  } catch (err) {
    console.error(`Slack Home for ${tenant} failed: ${err instanceof Error ? err.message : String(err)}`);
  }
}

// Slack's assistant surface (an app with the assistant view: its DM threads
// are assistant threads). A thread started gets the agent's suggested prompts;
// what the person is looking at reaches the model as a note; the working
// state shows with assistant.threads.setStatus under the input rather than as
// a status message; the thread is titled after its first message.
import { z } from "zod";
import { parseJsonVar } from "../../lib/config.ts";
import type { ReplyAddress } from "../../runtime/index.ts";
import { clip } from "../../lib/text.ts";
import { botTokenFor } from "./installations.ts";
import { callSlack, type SlackResult } from "./web-api.ts";

/** Slack shows at most 4 suggested prompts. */
const promptsSchema = z.array(z.object({ title: z.string().min(1).max(75), message: z.string().min(1).max(2000) })).max(4);
export type SuggestedPrompt = z.infer<typeof promptsSchema>[number];

const DEFAULT_PROMPTS: SuggestedPrompt[] = [
  { title: "What can you do?", message: "What can you do for me, and which tools do you have?" },
  { title: "Summarise this channel", message: "Summarise the channel I am looking at." },
];
const TITLE_LIMIT = 60;

/** The deployment's Slack app has the assistant view: its DM threads are assistant threads (SLACK_ASSISTANT). */
export function assistantEnabled(env: Env): boolean {
  return env.SLACK_ASSISTANT === "true";
}

/** SLACK_SUGGESTED_PROMPTS: a JSON array of up to 4 {title, message}; empty → two general ones. */
export function suggestedPrompts(env: Env): SuggestedPrompt[] {
  return env.SLACK_SUGGESTED_PROMPTS?.trim() ? parseJsonVar("SLACK_SUGGESTED_PROMPTS", env.SLACK_SUGGESTED_PROMPTS, promptsSchema, "[]") : DEFAULT_PROMPTS;
}

/** An assistant thread, as the reply address of its conversation names it. */
export const isAssistantThread = (target: ReplyAddress["target"]) => target.assistant === true;

async function call(env: Env, tenant: string, method: string, body: Record<string, unknown>): Promise<SlackResult> {
  const token = await botTokenFor(env, tenant);
  if (!token) return { ok: false, error: `no bot token for workspace ${tenant}`, permanent: true };
  return callSlack(env, method, token, body);
}

/** Work done after Slack has its answer: it never throws, a failure is logged. */
async function logged(what: string, work: () => Promise<SlackResult>): Promise<void> {
  try {
    const result = await work();
    if (!result.ok) console.error(`Slack ${what}: ${result.error}`);
  } catch (err) {
    console.error(`Slack ${what} failed: ${err instanceof Error ? err.message : String(err)}`);
  }
}

export function setSuggestedPrompts(env: Env, tenant: string, channel: string, threadTs: string): Promise<void> {
  return logged("suggested prompts", async () =>
    call(env, tenant, "assistant.threads.setSuggestedPrompts", { channel_id: channel, thread_ts: threadTs, prompts: suggestedPrompts(env) }),
  );
}

export function setTitle(env: Env, tenant: string, channel: string, threadTs: string, firstMessage: string): Promise<void> {
  const title = clip(firstMessage.replace(/\s+/g, " ").trim(), TITLE_LIMIT);
  return logged("thread title", () => call(env, tenant, "assistant.threads.setTitle", { channel_id: channel, thread_ts: threadTs, title }));
}

/** The thread's working state under the input; an empty status clears it (a reply clears it too). */
export function setStatus(env: Env, token: string, channel: string, threadTs: string, status: string): Promise<SlackResult> {
  return callSlack(env, "assistant.threads.setStatus", token, { channel_id: channel, thread_ts: threadTs, status });
}

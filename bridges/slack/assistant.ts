// Slack's assistant surface (an app with the assistant view: its DM threads
// are assistant threads). A thread started gets the agent's suggested prompts;
// what the person is looking at reaches the model as a note; the working
// state shows with assistant.threads.setStatus under the input rather than as
// a status message; the thread is titled after its first message.
import type { ReplyAddress } from "../../runtime/index.ts";
import { clip } from "../../lib/text.ts";
import { suggestedPrompts } from "./config.ts";
import { botTokenFor } from "./installations.ts";
import { callSlack, type SlackResult } from "./web-api.ts";

/** Slack shows at most 4 suggested prompts. */
const TITLE_LIMIT = 60;

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

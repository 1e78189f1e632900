// The system prompt an agent's model calls start with.
import type { Route } from "./chat.ts";
import type { ModelChoice } from "./models/index.ts";

export function systemPrompt(env: Env, route: Route, model: ModelChoice): string {
  const custom = (env as unknown as Record<string, unknown>).AGENT_SYSTEM_PROMPT;
  if (typeof custom === "string" && custom.trim() !== "") return custom;
  const who = model.kind === "local" ? "the offline local model" : model.model;
  return (
    `You are "${route.agent}", an AI agent that works in a team chat (workspace "${route.tenant}"), running as ${who}. ` +
    "Answer concisely in Markdown. Use the tools you are given when they help; tool names are <mount>__<tool>. " +
    "Messages marked [runtime note] come from the runtime, not the person."
  );
}

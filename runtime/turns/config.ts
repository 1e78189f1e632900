// The agent's instructions, when the operator gives their own (AGENT_SYSTEM_PROMPT).

/** AGENT_SYSTEM_PROMPT: the agent's instructions in place of the built-in ones; empty → none. */
export function customSystemPrompt(env: Env): string | undefined {
  return env.AGENT_SYSTEM_PROMPT?.trim() ? env.AGENT_SYSTEM_PROMPT : undefined;
}

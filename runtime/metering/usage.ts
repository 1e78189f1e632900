// What one model call used, as the columns a model job row keeps.
import type { AssistantMessage } from "@mariozechner/pi-ai";

/** The usage columns of `model_jobs` (runtime/store/schema.ts). */
export interface UsageRow {
  /** `<provider>/<model>` as the reply names them. */
  model: string;
  /** Input tokens read neither from nor into the prompt cache. */
  input_tokens: number;
  cache_read_tokens: number;
  cache_write_tokens: number;
  output_tokens: number;
  /** USD, priced by the model table. */
  cost: number;
}

/**
 * pi-ai reports every API's usage the same way: `input` excludes cached tokens
 * (OpenAI and Gemini count them inside the prompt; pi-ai subtracts them), so
 * the prompt was input + cacheRead + cacheWrite tokens.
 */
export function usageRow(message: AssistantMessage): UsageRow {
  const { usage } = message;
  return {
    model: `${message.provider}/${message.model}`,
    input_tokens: usage.input,
    cache_read_tokens: usage.cacheRead,
    cache_write_tokens: usage.cacheWrite,
    output_tokens: usage.output,
    cost: usage.cost.total,
  };
}

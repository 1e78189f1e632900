// What one model call used, as the columns a model job row keeps, and the
// models that used tokens without a price.
import type { AssistantMessage } from "@mariozechner/pi-ai";
import type { UsageReport } from "./ledger.ts";

/** The usage columns of `model_jobs` (runtime/models/schema.ts). */
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

/**
 * A model without a price costs nothing here: wherever its cost is shown it is
 * named, since no spend limit can apply to it.
 */
export function unpricedSentence(model: string): string {
  return `model ${model} has no price in the model table: its calls are counted in tokens but cost $0 here, so no spend limit can apply to them (give it a cost in MODEL_PROVIDERS)`;
}

/** The models of a report that used tokens and cost nothing: unpriced. */
export function unpricedModels(report: UsageReport): string[] {
  const used = report.usage.filter((r) => r.costUsd === 0 && r.inputTokens + r.cachedInputTokens + r.cacheWriteTokens + r.outputTokens > 0);
  return [...new Set(used.map((r) => r.model))].sort();
}

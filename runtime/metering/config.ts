// The spend limits, parsed here.
import * as z from "zod";
import { parseJsonVar } from "../../lib/config.ts";

const spendLimit = z.number().nonnegative().nullable();

/** The deployment's default daily spend limit per tenant in USD (DAILY_SPEND_LIMIT_USD); empty: none. */
export function dailySpendLimit(env: Env): number | null {
  return parseJsonVar("DAILY_SPEND_LIMIT_USD", env.DAILY_SPEND_LIMIT_USD, spendLimit, "null");
}

/** The daily limit over all tenants together in USD (PLATFORM_DAILY_SPEND_LIMIT_USD); empty: none. */
export function platformDailySpendLimit(env: Env): number | null {
  return parseJsonVar("PLATFORM_DAILY_SPEND_LIMIT_USD", env.PLATFORM_DAILY_SPEND_LIMIT_USD, spendLimit, "null");
}

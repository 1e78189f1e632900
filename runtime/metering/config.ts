// The spend limits and the machines' prices, parsed here.
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

/** USD per hour of a machine's resources (MACHINE_PRICES); empty: machines are counted in time, unpriced. */
const machinePricesSchema = z
  .object({ vcpuHour: z.number().nonnegative().default(0), memoryGiBHour: z.number().nonnegative().default(0), diskGiBHour: z.number().nonnegative().default(0) })
  .strict()
  .nullable();
export type MachinePrices = NonNullable<z.infer<typeof machinePricesSchema>>;

export function machinePrices(env: Env): MachinePrices | null {
  return parseJsonVar("MACHINE_PRICES", env.MACHINE_PRICES, machinePricesSchema, "null");
}

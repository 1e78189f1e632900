// Metering, done by the courier around each provider call (never by the agent's
// object): the daily spend check before the call, on readings at most 30 s
// old (the platform's included, which its ledger has from the tenants' ledgers'
// reports), and the count after it, in the tenant's ledger only.
// docs/metering.md says what is counted and how far a tenant can overshoot
// between readings.
import type { AssistantMessage } from "@mariozechner/pi-ai";
import type { HourBusy } from "./busy-time.ts";
import type { Route } from "../chat.ts";
import type { HeldSpan } from "../../plugins/index.ts";
import { dailySpendLimit, machinePrices, platformDailySpendLimit } from "./config.ts";
import { dayStart, ledgerStub, type LedgerReading, SPEND_REPORT_EVERY_MS, type TenantLimit, type UsageEntry } from "./ledger.ts";
import { unpricedSentence, usageRow } from "./usage.ts";

/** Who pays for a call: nobody (the local model), the operator, or the tenant with its own key (a model choice says). */
export type Payer = { kind: "local" } | { kind: "provider"; byok?: boolean };

/** A reading older than this is read again before a call is let through. */
export const READING_MAX_AGE_MS = 30_000;
/** The platform's reading is kept less long: its ledger has a tenant's spend up to SPEND_REPORT_EVERY_MS late, and the figure is at most 30 s old all told. */
const PLATFORM_READING_MAX_AGE_MS = READING_MAX_AGE_MS - SPEND_REPORT_EVERY_MS;

/**
 * Readings per ledger ("tenant:<id>", "platform"), shared by every courier of
 * the isolate. A count made here adds to the cached reading at once, so calls
 * from this isolate are seen without waiting; others within 30 s.
 */
const readings = new Map<string, { reading: LedgerReading; at: number }>();
/** Models already logged as having no price. */
const unpriced = new Set<string>();

/** The sentence a refused call fails its turn with, or null when the call may go. */
export async function spendRefusal(env: Env, route: Route, choice: Payer): Promise<string | null> {
  // The local model costs nothing; a tenant's own key is not the operator's money.
  if (choice.kind !== "provider" || choice.byok) return null;
  const tenant = await reading(env, route.tenant);
  const limit = effectiveLimit(env, tenant.limit);
  if (limit.exempt) return null;
  if (limit.dailyUsd !== null && tenant.spentUsd >= limit.dailyUsd) return limitSentence(tenant.spentUsd, limit.dailyUsd);
  const platformLimit = platformDailySpendLimit(env);
  if (platformLimit === null) return null;
  const platform = await reading(env, undefined);
  return platform.spentUsd >= platformLimit ? limitSentence(platform.spentUsd, platformLimit) : null;
}

/** The limit that applies to a tenant: its own, else the deployment's default; none when exempt. */
export function effectiveLimit(env: Env, own: TenantLimit | null): { dailyUsd: number | null; exempt: boolean } {
  if (own?.exempt) return { dailyUsd: null, exempt: true };
  return { dailyUsd: own?.dailyUsd ?? dailySpendLimit(env), exempt: false };
}

export function limitSentence(spent: number, limit: number): string {
  return `Daily usage limit reached ($${usd(spent)} of $${usd(limit)}); resets at 00:00 UTC.`;
}

function usd(n: number): string {
  return n === 0 || n >= 1 ? n.toFixed(2) : n.toFixed(4);
}

/** A provider answer paid for: its id (a job called twice was paid twice), how it was paid, what it used. */
export interface PaidAnswer {
  call: string;
  choice: Payer;
  message: AssistantMessage;
  child: boolean;
}

/**
 * What one model job leaves in the tenant's ledger, in one call: what its
 * answer used, counted once per `paid.call`, and the agent's busy time per
 * hour it carried (the ledger reports the operator-paid spend on to the
 * platform's). The call is paid for already: a ledger that cannot be reached
 * is logged, never a reason to call again; false says it could not, so the
 * caller keeps the answer to count again (the same call is counted once).
 */
export function countJob(env: Env, route: Route, hours: HourBusy[], paid: PaidAnswer | null): Promise<boolean> {
  const usage = paid && usageEntry(route, paid);
  const busy = hours.length > 0 ? { tenant: route.tenant, agent: route.agent, hours } : null;
  if (!usage && !busy) return Promise.resolve(true);
  return inTenantLedger(route.tenant, `job ${paid?.call ?? "(busy time)"}`, async () => {
    if ((await ledgerStub(env, route.tenant).record(usage, busy)) && !usage!.byok) addToReadings(route.tenant, usage!.costUsd);
  });
}

/**
 * A machine's time, in the tenant's ledger (the operator pays for machines:
 * the ledger reports its cost on to the platform's), priced by
 * MACHINE_PRICES; false when the ledger could not take it (the caller keeps
 * it to count again: the same span is counted once).
 */
export function countHeld(env: Env, route: Route, held: HeldSpan): Promise<boolean> {
  const prices = machinePrices(env);
  const hours = Math.max(held.endedAt - held.startedAt, 0) / 3_600_000;
  const costUsd = prices ? hours * (held.vcpu * prices.vcpuHour + (held.memoryMiB / 1024) * prices.memoryGiBHour + (held.diskMiB / 1024) * prices.diskGiBHour) : 0;
  const entry = { span: held.id, tenant: route.tenant, agent: route.agent, size: held.size, startedAt: held.startedAt, endedAt: held.endedAt, costUsd };
  return inTenantLedger(route.tenant, `machine ${held.id}`, async () => {
    if (await ledgerStub(env, route.tenant).countHeld(entry)) addToReadings(route.tenant, costUsd);
  });
}

/** Runs `count` against the tenant's ledger; false when it could not be reached (logged, naming `what`). */
function inTenantLedger(tenant: string, what: string, count: () => Promise<void>): Promise<boolean> {
  return count().then(
    () => true,
    (err: unknown) => {
      console.error(`the ledger of tenant ${tenant} could not count ${what}`, err);
      return false;
    },
  );
}

function usageEntry(route: Route, { call, choice, message, child }: PaidAnswer): UsageEntry {
  const usage = usageRow(message);
  const tokens = usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens + usage.output_tokens;
  if (choice.kind === "provider" && usage.cost === 0 && tokens > 0 && !unpriced.has(usage.model)) {
    unpriced.add(usage.model);
    console.warn(unpricedSentence(usage.model));
  }
  return {
    call,
    tenant: route.tenant,
    agent: route.agent,
    model: usage.model,
    at: Date.now(),
    byok: choice.kind === "provider" && choice.byok === true,
    inputTokens: usage.input_tokens,
    cacheReadTokens: usage.cache_read_tokens,
    cacheWriteTokens: usage.cache_write_tokens,
    outputTokens: usage.output_tokens,
    costUsd: usage.cost,
    child,
  };
}

/** Forgets a tenant's cached reading (its limit changed through this isolate). */
export function forgetReading(tenant: string): void {
  readings.delete(keyOf(tenant));
}

async function reading(env: Env, tenant: string | undefined): Promise<LedgerReading> {
  const key = keyOf(tenant);
  const cached = readings.get(key);
  const now = Date.now();
  const maxAge = tenant === undefined ? PLATFORM_READING_MAX_AGE_MS : READING_MAX_AGE_MS;
  if (cached && now - cached.at <= maxAge && cached.reading.day === dayStart(now)) return cached.reading;
  const fresh = await ledgerStub(env, tenant).reading();
  readings.set(key, { reading: fresh, at: now });
  return fresh;
}

/** A count made here adds to the tenant's cached reading and the platform's at once. */
function addToReadings(tenant: string, cost: number): void {
  for (const key of [keyOf(tenant), keyOf(undefined)]) {
    const cached = readings.get(key);
    if (cached && cached.reading.day === dayStart(Date.now())) cached.reading.spentUsd += cost;
  }
}

function keyOf(tenant: string | undefined): string {
  return tenant === undefined ? "platform" : `tenant:${tenant}`;
}

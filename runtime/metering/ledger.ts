// The usage ledger: a Durable Object per tenant ("tenant:<id>") and one for
// the platform ("platform", the operator's total). Each model call's tokens and
// priced cost are counted per (tenant, agent, model, hour), once per provider
// answer (a job whose call was made twice was paid, and is counted, twice;
// one answer counted again is ignored), and each agent object's busy time per
// (tenant, agent, hour), with the part of it that served no turn. Couriers
// write it (runtime/metering/spend.ts); the
// Agents API, `status` and the console read it. A tenant's ledger also keeps
// the tenant's daily spend limit, so the check before a call asks one object.
import { DurableObject } from "cloudflare:workers";
import * as z from "zod";
import { type BusyPart, hourOf, type HourBusy } from "./busy-time.ts";

export const DAY_MS = 86_400_000;
/** Counted answers are remembered this long; an answer is counted within seconds of arriving. */
const KEEP_COUNTED_MS = 7 * DAY_MS;

export interface UsageEntry {
  /** The provider answer (`<job>:<unique>`): an answer is counted once. */
  call: string;
  tenant: string;
  agent: string;
  /** `<provider>/<model>` as the reply names them. */
  model: string;
  /** When the reply came, ms since the epoch. */
  at: number;
  /** Paid with the tenant's own key: counted, but not toward the operator's limits. */
  byok: boolean;
  inputTokens: number;
  cacheReadTokens: number;
  cacheWriteTokens: number;
  outputTokens: number;
  costUsd: number;
}

/** A tenant's limit as the admin API sets it: a daily limit in USD (null: the deployment's default), or exempt from every limit. */
export const tenantLimitSchema = z
  .object({
    dailyUsd: z.number().nonnegative().max(1e9).nullable(),
    exempt: z.boolean().default(false),
  })
  .strict();
export type TenantLimit = z.infer<typeof tenantLimitSchema>;

/** What the check before a call needs: today's (UTC) spend paid by the operator, and the tenant's own limit. */
export interface LedgerReading {
  /** Start of the UTC day the reading is of. */
  day: number;
  spentUsd: number;
  limit: TenantLimit | null;
}

/** Model calls and what they used; `inputTokens` excludes cached ones. */
export interface TokenCounts {
  calls: number;
  inputTokens: number;
  cachedInputTokens: number;
  cacheWriteTokens: number;
  outputTokens: number;
  costUsd: number;
}

export interface UsageRowOut extends TokenCounts {
  hour: number;
  tenant: string;
  agent: string;
  model: string;
  byok: boolean;
}

export interface BusyRowOut {
  hour: number;
  agent: string;
  busyMs: number;
  passes: number;
  handlers: number;
  /** The part of busyMs that served no conversation's turn, by part (runtime/metering/busy-time.ts). */
  outsideTurns: Partial<Record<BusyPart, number>>;
}

export interface UsageReport {
  usage: UsageRowOut[];
  busy: BusyRowOut[];
}

const SCHEMA = `
  CREATE TABLE IF NOT EXISTS usage (
    tenant TEXT NOT NULL, agent TEXT NOT NULL, model TEXT NOT NULL, hour INTEGER NOT NULL, byok INTEGER NOT NULL,
    calls INTEGER NOT NULL, input_tokens INTEGER NOT NULL, cache_read_tokens INTEGER NOT NULL,
    cache_write_tokens INTEGER NOT NULL, output_tokens INTEGER NOT NULL, cost REAL NOT NULL,
    PRIMARY KEY (tenant, agent, model, hour, byok)
  );
  -- reading() sums today's hours before calls, report() reads a range: both by hour, not a scan of every past hour.
  CREATE INDEX IF NOT EXISTS usage_hour ON usage (hour);
  CREATE TABLE IF NOT EXISTS counted_calls (call TEXT PRIMARY KEY, at INTEGER NOT NULL);
  -- count() prunes by age on every call: the platform's ledger holds a week of every tenant's calls.
  CREATE INDEX IF NOT EXISTS counted_calls_at ON counted_calls (at);
  CREATE TABLE IF NOT EXISTS busy (
    tenant TEXT NOT NULL, agent TEXT NOT NULL, hour INTEGER NOT NULL,
    busy_ms REAL NOT NULL, passes INTEGER NOT NULL, handlers INTEGER NOT NULL,
    PRIMARY KEY (tenant, agent, hour)
  );
  CREATE INDEX IF NOT EXISTS busy_hour ON busy (hour);
  CREATE TABLE IF NOT EXISTS busy_outside (
    tenant TEXT NOT NULL, agent TEXT NOT NULL, hour INTEGER NOT NULL, part TEXT NOT NULL, busy_ms REAL NOT NULL,
    PRIMARY KEY (tenant, agent, hour, part)
  );
  CREATE INDEX IF NOT EXISTS busy_outside_hour ON busy_outside (hour);
  CREATE TABLE IF NOT EXISTS tenant_limit (id INTEGER PRIMARY KEY CHECK (id = 1), value TEXT NOT NULL);
`;

export class Ledger extends DurableObject<Env> {
  private readonly sql: SqlStorage;

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    this.sql = ctx.storage.sql;
    this.sql.exec(SCHEMA);
  }

  /** Counts a provider answer once: false when it was counted already. */
  async count(entry: UsageEntry): Promise<boolean> {
    return this.ctx.storage.transactionSync(() => {
      if (this.sql.exec("INSERT OR IGNORE INTO counted_calls (call, at) VALUES (?, ?)", entry.call, entry.at).rowsWritten === 0) return false;
      this.sql.exec(
        `INSERT INTO usage (tenant, agent, model, hour, byok, calls, input_tokens, cache_read_tokens, cache_write_tokens, output_tokens, cost)
         VALUES (?, ?, ?, ?, ?, 1, ?, ?, ?, ?, ?)
         ON CONFLICT (tenant, agent, model, hour, byok) DO UPDATE SET calls = calls + 1,
           input_tokens = input_tokens + excluded.input_tokens, cache_read_tokens = cache_read_tokens + excluded.cache_read_tokens,
           cache_write_tokens = cache_write_tokens + excluded.cache_write_tokens, output_tokens = output_tokens + excluded.output_tokens,
           cost = cost + excluded.cost`,
        entry.tenant,
        entry.agent,
        entry.model,
        hourOf(entry.at),
        entry.byok ? 1 : 0,
        entry.inputTokens,
        entry.cacheReadTokens,
        entry.cacheWriteTokens,
        entry.outputTokens,
        entry.costUsd,
      );
      this.sql.exec("DELETE FROM counted_calls WHERE at < ?", entry.at - KEEP_COUNTED_MS);
      return true;
    });
  }

  /**
   * An agent object's busy time per hour, as the object itself sums it: each
   * report carries the hour's total so far, so the larger value stays and a
   * report repeated or out of order changes nothing.
   */
  async busy(tenant: string, agent: string, hours: HourBusy[]): Promise<void> {
    for (const h of hours) {
      this.sql.exec(
        `INSERT INTO busy (tenant, agent, hour, busy_ms, passes, handlers) VALUES (?, ?, ?, ?, ?, ?)
         ON CONFLICT (tenant, agent, hour) DO UPDATE SET busy_ms = MAX(busy_ms, excluded.busy_ms),
           passes = MAX(passes, excluded.passes), handlers = MAX(handlers, excluded.handlers)`,
        tenant,
        agent,
        h.hour,
        h.busyMs,
        h.passes,
        h.handlers,
      );
      // An object from before the parts were kept sends none.
      for (const [part, ms] of Object.entries(h.outsideTurns ?? {})) {
        this.sql.exec(
          `INSERT INTO busy_outside (tenant, agent, hour, part, busy_ms) VALUES (?, ?, ?, ?, ?)
           ON CONFLICT (tenant, agent, hour, part) DO UPDATE SET busy_ms = MAX(busy_ms, excluded.busy_ms)`,
          tenant,
          agent,
          h.hour,
          part,
          ms,
        );
      }
    }
  }

  /** Today's (UTC) spend paid with the operator's keys, and the tenant's limit. */
  async reading(): Promise<LedgerReading> {
    const day = dayStart(Date.now());
    const spent = this.sql.exec<{ cost: number | null }>("SELECT SUM(cost) AS cost FROM usage WHERE byok = 0 AND hour >= ?", day).one().cost ?? 0;
    return { day, spentUsd: spent, limit: this.limit() };
  }

  async setLimit(limit: TenantLimit | null): Promise<void> {
    if (limit === null) this.sql.exec("DELETE FROM tenant_limit");
    else this.sql.exec("INSERT OR REPLACE INTO tenant_limit (id, value) VALUES (1, ?)", JSON.stringify(limit));
  }

  /** Usage and busy time per hour in [from, to). */
  async report(from: number, to: number): Promise<UsageReport> {
    const usage = this.sql
      .exec<{
        hour: number;
        tenant: string;
        agent: string;
        model: string;
        byok: number;
        calls: number;
        input_tokens: number;
        cache_read_tokens: number;
        cache_write_tokens: number;
        output_tokens: number;
        cost: number;
      }>("SELECT * FROM usage WHERE hour >= ? AND hour < ? ORDER BY hour, agent, model, byok", hourOf(from), to)
      .toArray()
      .map((r) => ({
        hour: r.hour,
        tenant: r.tenant,
        agent: r.agent,
        model: r.model,
        byok: r.byok === 1,
        calls: r.calls,
        inputTokens: r.input_tokens,
        cachedInputTokens: r.cache_read_tokens,
        cacheWriteTokens: r.cache_write_tokens,
        outputTokens: r.output_tokens,
        costUsd: r.cost,
      }));
    const busy = this.sql
      .exec<{ hour: number; agent: string; busy_ms: number; passes: number; handlers: number }>(
        "SELECT hour, agent, busy_ms, passes, handlers FROM busy WHERE hour >= ? AND hour < ? ORDER BY hour, agent",
        hourOf(from),
        to,
      )
      .toArray();
    const parts = this.sql
      .exec<{ hour: number; agent: string; part: BusyPart; busy_ms: number }>("SELECT hour, agent, part, busy_ms FROM busy_outside WHERE hour >= ? AND hour < ?", hourOf(from), to)
      .toArray();
    const outsideOf = (hour: number, agent: string) => Object.fromEntries(parts.filter((p) => p.hour === hour && p.agent === agent).map((p) => [p.part, p.busy_ms]));
    return {
      usage,
      busy: busy.map((r) => ({ hour: r.hour, agent: r.agent, busyMs: r.busy_ms, passes: r.passes, handlers: r.handlers, outsideTurns: outsideOf(r.hour, r.agent) })),
    };
  }

  private limit(): TenantLimit | null {
    const row = this.sql.exec<{ value: string }>("SELECT value FROM tenant_limit").toArray()[0];
    return row ? (JSON.parse(row.value) as TenantLimit) : null;
  }
}

export function dayStart(ms: number): number {
  return Math.floor(ms / DAY_MS) * DAY_MS;
}

/** A tenant's ledger, or with no tenant the platform's. */
export function ledgerStub(env: Env, tenant?: string): DurableObjectStub<Ledger> {
  const namespace = env.LEDGER as DurableObjectNamespace<Ledger>;
  return namespace.get(namespace.idFromName(tenant === undefined ? "platform" : `tenant:${tenant}`));
}

// The usage ledger: a Durable Object per tenant ("tenant:<id>") and one for
// the platform ("platform"). Each model call's tokens and priced cost are
// counted in the tenant's ledger per (agent, model, hour), once per provider
// answer (a job whose call was made twice was paid, and is counted, twice;
// one answer counted again is ignored), and each agent object's busy time per
// (agent, hour), with the part of it that served no turn, and each machine's
// time per (agent, size, hour), priced. Hours older than FOLD_AFTER_MS are
// folded into days (fold(), asked daily by a Cron Trigger:
// runtime/edge/ledger-cron.ts); days are kept. Couriers write a tenant's
// ledger (runtime/metering/spend.ts); the Agents API, `status` and the
// console read it. A tenant's ledger also keeps the tenant's daily spend
// limit, so the check before a call asks one object. The platform's ledger is
// on no call's way: it keeps only the operator-paid spend per UTC day, for the
// platform's limit, which each tenant's ledger reports to it in sums at most
// every SPEND_REPORT_EVERY_MS (its alarm), each report numbered so a retry is
// taken once (docs/metering.md, "The platform's total").
import { DurableObject } from "cloudflare:workers";
import * as z from "zod";
import { type Migration, runMigrations } from "../../lib/migrations.ts";
import { type BusyPart, hourOf, type HourBusy } from "./busy-time.ts";
import { countedNamespace } from "../../lib/object-calls.ts";

export const DAY_MS = 86_400_000;
const HOUR_MS = 3_600_000;
/** Hours are kept this long, then folded into days: as long as an object keeps its own busy hours (runtime/object/pass.ts), so no report comes for a folded hour. */
export const FOLD_AFTER_MS = 35 * DAY_MS;
/** Counted answers are remembered this long; an answer is counted within seconds of arriving. */
const KEEP_COUNTED_MS = 7 * DAY_MS;
/** A tenant's ledger reports the spend it counted to the platform's at most this often (and this soon after a count). */
export const SPEND_REPORT_EVERY_MS = 10_000;

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
  /** A child run's call (runtime/turns/delegation.ts): counted in the row's child part too. */
  child: boolean;
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

/** A row's period: an hour, or (past FOLD_AFTER_MS) the whole day starting at `hour`. */
export type Span = "hour" | "day";

export interface UsageRowOut extends TokenCounts {
  hour: number;
  span: Span;
  tenant: string;
  agent: string;
  model: string;
  byok: boolean;
  /** Of calls and costUsd, what child runs (subagents) made. */
  childCalls: number;
  childCostUsd: number;
}

export interface BusyRowOut {
  hour: number;
  span: Span;
  agent: string;
  busyMs: number;
  passes: number;
  handlers: number;
  /** The part of busyMs that served no conversation's turn, by part (runtime/metering/busy-time.ts). */
  outsideTurns: Partial<Record<BusyPart, number>>;
}

/** A machine's time (plugins/machine.ts), from its start to its end, priced when it ends. */
export interface HeldEntry {
  /** The machine and its start: a span is counted once. */
  span: string;
  tenant: string;
  agent: string;
  size: string;
  startedAt: number;
  endedAt: number;
  costUsd: number;
}

/** Machines' time in a row's period: `machines` ended in it, `seconds` held in it (a machine's span is split across the hours it ran). */
export interface MachineRowOut {
  hour: number;
  span: Span;
  agent: string;
  size: string;
  machines: number;
  seconds: number;
  costUsd: number;
}

/** Operator-paid spend of one UTC day, as a tenant's ledger reports it to the platform's. */
export interface DaySpend {
  day: number;
  /** Model calls paid with the operator's keys. */
  calls: number;
  /** Their cost and machines' cost, USD. */
  costUsd: number;
}

export interface UsageReport {
  usage: UsageRowOut[];
  busy: BusyRowOut[];
  machines: MachineRowOut[];
}

/**
 * Append-only (lib/migrations.ts, docs/design.md "Migrations"): a schema
 * change is a new entry. The first is the schema releases before versioning
 * created with IF NOT EXISTS on every wake, so a ledger they wrote is adopted.
 */
const MIGRATIONS: readonly Migration[] = [
  {
    name: "usage, counted calls, busy time, tenant limit",
    sql: `
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
`,
  },
  {
    // Days: the hour tables' rows folded per UTC day (fold()), columns in the same order, `day` for `hour`.
    name: "days folded from hours",
    sql: `
  CREATE TABLE usage_days (
    tenant TEXT NOT NULL, agent TEXT NOT NULL, model TEXT NOT NULL, day INTEGER NOT NULL, byok INTEGER NOT NULL,
    calls INTEGER NOT NULL, input_tokens INTEGER NOT NULL, cache_read_tokens INTEGER NOT NULL,
    cache_write_tokens INTEGER NOT NULL, output_tokens INTEGER NOT NULL, cost REAL NOT NULL,
    PRIMARY KEY (tenant, agent, model, day, byok)
  );
  CREATE TABLE busy_days (
    tenant TEXT NOT NULL, agent TEXT NOT NULL, day INTEGER NOT NULL,
    busy_ms REAL NOT NULL, passes INTEGER NOT NULL, handlers INTEGER NOT NULL,
    PRIMARY KEY (tenant, agent, day)
  );
  CREATE TABLE busy_outside_days (
    tenant TEXT NOT NULL, agent TEXT NOT NULL, day INTEGER NOT NULL, part TEXT NOT NULL, busy_ms REAL NOT NULL,
    PRIMARY KEY (tenant, agent, day, part)
  );
`,
  },
  {
    // Subagents: of a row's calls and cost, what child runs made (count(); fold() and report() carry them).
    name: "child runs' part",
    sql: `
  ALTER TABLE usage ADD COLUMN child_calls INTEGER NOT NULL DEFAULT 0;
  ALTER TABLE usage ADD COLUMN child_cost REAL NOT NULL DEFAULT 0;
  ALTER TABLE usage_days ADD COLUMN child_calls INTEGER NOT NULL DEFAULT 0;
  ALTER TABLE usage_days ADD COLUMN child_cost REAL NOT NULL DEFAULT 0;
`,
  },
  {
    // Machines: each one's time from its start to its end, per size, split across the hours it ran (countHeld()).
    name: "machine time",
    sql: `
  CREATE TABLE machine_time (
    tenant TEXT NOT NULL, agent TEXT NOT NULL, size TEXT NOT NULL, hour INTEGER NOT NULL,
    machines INTEGER NOT NULL, seconds REAL NOT NULL, cost REAL NOT NULL,
    PRIMARY KEY (tenant, agent, size, hour)
  );
  CREATE INDEX machine_time_hour ON machine_time (hour);
  CREATE TABLE machine_time_days (
    tenant TEXT NOT NULL, agent TEXT NOT NULL, size TEXT NOT NULL, day INTEGER NOT NULL,
    machines INTEGER NOT NULL, seconds REAL NOT NULL, cost REAL NOT NULL,
    PRIMARY KEY (tenant, agent, size, day)
  );
`,
  },
  {
    // The platform's total without a row per tenant on the platform's ledger (reportSpend(), takeSpend()).
    name: "spend reported to the platform",
    sql: `
  -- A tenant's ledger: operator-paid spend counted and not yet in a report, per UTC day.
  CREATE TABLE unreported_spend (day INTEGER PRIMARY KEY, calls INTEGER NOT NULL, cost REAL NOT NULL);
  -- A tenant's ledger: its reports, the one under way (sent = 0) and those taken, kept a week (the last always: the next one's seq follows it).
  CREATE TABLE spend_reports (seq INTEGER PRIMARY KEY, days TEXT NOT NULL, sent INTEGER NOT NULL, at INTEGER NOT NULL);
  -- The platform's ledger: the reported spend summed per UTC day, and the last report taken from each ledger (its object id).
  CREATE TABLE platform_spend (day INTEGER PRIMARY KEY, calls INTEGER NOT NULL, cost REAL NOT NULL);
  CREATE TABLE spend_sources (source TEXT PRIMARY KEY, seq INTEGER NOT NULL);
`,
  },
];

/** Each hour's UTC day, in SQL. */
const DAY_OF_HOUR = `hour - hour % ${DAY_MS}`;

export class Ledger extends DurableObject<Env> {
  private readonly sql: SqlStorage;
  /** The platform's ledger takes reports; only a tenant's reports what it counts. */
  private readonly reports: boolean;

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    this.sql = ctx.storage.sql;
    this.reports = !ctx.id.equals(ledgerStub(env).id);
    runMigrations(ctx.storage, MIGRATIONS);
    // Spend left to report with no alarm set (the object stopped between a count and its alarm) is reported as it wakes.
    void ctx.blockConcurrencyWhile(() => this.reportPending());
  }

  /** Counts a provider answer once: false when it was counted already. */
  async count(entry: UsageEntry): Promise<boolean> {
    const added = this.ctx.storage.transactionSync(() => {
      if (this.sql.exec("INSERT OR IGNORE INTO counted_calls (call, at) VALUES (?, ?)", entry.call, entry.at).rowsWritten === 0) return false;
      this.sql.exec(
        `INSERT INTO usage (tenant, agent, model, hour, byok, calls, input_tokens, cache_read_tokens, cache_write_tokens, output_tokens, cost, child_calls, child_cost)
         VALUES (?, ?, ?, ?, ?, 1, ?, ?, ?, ?, ?, ?, ?)
         ON CONFLICT (tenant, agent, model, hour, byok) DO UPDATE SET calls = calls + 1,
           input_tokens = input_tokens + excluded.input_tokens, cache_read_tokens = cache_read_tokens + excluded.cache_read_tokens,
           cache_write_tokens = cache_write_tokens + excluded.cache_write_tokens, output_tokens = output_tokens + excluded.output_tokens,
           cost = cost + excluded.cost, child_calls = child_calls + excluded.child_calls, child_cost = child_cost + excluded.child_cost`,
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
        entry.child ? 1 : 0,
        entry.child ? entry.costUsd : 0,
      );
      this.sql.exec("DELETE FROM counted_calls WHERE at < ?", entry.at - KEEP_COUNTED_MS);
      if (!entry.byok) this.unreported(dayStart(entry.at), 1, entry.costUsd);
      return true;
    });
    if (added && !entry.byok) await this.reportSoon();
    return added;
  }

  /**
   * What one model job leaves here, in one call (runtime/metering/spend.ts,
   * countJob): its answer's usage, counted once (false when counted already,
   * or none came), and the agent's busy time.
   */
  async record(usage: UsageEntry | null, busy: { tenant: string; agent: string; hours: HourBusy[] } | null): Promise<boolean> {
    if (busy) this.busy(busy.tenant, busy.agent, busy.hours);
    return usage ? this.count(usage) : false;
  }

  /**
   * A machine's time, counted once per span: the seconds (and the cost, in
   * proportion) of each hour it ran, and the machine itself in the hour it ended.
   */
  async countHeld(entry: HeldEntry): Promise<boolean> {
    const added = this.ctx.storage.transactionSync(() => {
      if (this.sql.exec("INSERT OR IGNORE INTO counted_calls (call, at) VALUES (?, ?)", `held:${entry.span}`, entry.endedAt).rowsWritten === 0) return false;
      const total = Math.max(entry.endedAt - entry.startedAt, 0);
      // The hour of its last moment: a span ending on the hour ends in the hour before.
      const last = hourOf(entry.startedAt + Math.max(total - 1, 0));
      for (let hour = hourOf(entry.startedAt); hour <= last; hour += HOUR_MS) {
        const ms = Math.max(Math.min(entry.endedAt, hour + HOUR_MS) - Math.max(entry.startedAt, hour), 0);
        const cost = total > 0 ? (entry.costUsd * ms) / total : entry.costUsd;
        this.unreported(dayStart(hour), 0, cost);
        this.sql.exec(
          `INSERT INTO machine_time (tenant, agent, size, hour, machines, seconds, cost) VALUES (?, ?, ?, ?, ?, ?, ?)
           ON CONFLICT (tenant, agent, size, hour) DO UPDATE SET machines = machines + excluded.machines, seconds = seconds + excluded.seconds, cost = cost + excluded.cost`,
          entry.tenant,
          entry.agent,
          entry.size,
          hour,
          hour === last ? 1 : 0,
          ms / 1000,
          cost,
        );
      }
      return true;
    });
    if (added) await this.reportSoon();
    return added;
  }

  /** Adds operator-paid spend to what the next report to the platform's ledger carries (a tenant's ledger only). */
  private unreported(day: number, calls: number, cost: number): void {
    if (!this.reports) return;
    this.sql.exec(
      "INSERT INTO unreported_spend (day, calls, cost) VALUES (?, ?, ?) ON CONFLICT (day) DO UPDATE SET calls = calls + excluded.calls, cost = cost + excluded.cost",
      day,
      calls,
      cost,
    );
  }

  /** A report within SPEND_REPORT_EVERY_MS, unless one is due already. */
  private async reportSoon(): Promise<void> {
    if (this.reports && (await this.ctx.storage.getAlarm()) === null) await this.ctx.storage.setAlarm(Date.now() + SPEND_REPORT_EVERY_MS);
  }

  /**
   * Reports the spend counted since the last report to the platform's ledger:
   * one report at a time, written here with its number before it is sent, so
   * one cut short (a crash, the platform out of reach) is sent again as it was
   * and the platform's ledger takes it once; what is counted meanwhile waits
   * for the next.
   */
  override async alarm(): Promise<void> {
    const report = this.ctx.storage.transactionSync(() => this.reportUnderWay());
    if (!report) return;
    try {
      await ledgerStub(this.env).takeSpend(this.ctx.id.toString(), report.seq, report.days);
    } catch (err) {
      console.error(`a tenant's ledger could not report its spend (report ${report.seq}) to the platform's; it tries again`, err);
      await this.ctx.storage.setAlarm(Date.now() + SPEND_REPORT_EVERY_MS);
      return;
    }
    this.sql.exec("UPDATE spend_reports SET sent = 1 WHERE seq = ?", report.seq);
    await this.reportPending();
  }

  /** A report within SPEND_REPORT_EVERY_MS when there is spend unreported or a report not taken. */
  private async reportPending(): Promise<void> {
    if (this.sql.exec("SELECT 1 FROM unreported_spend UNION ALL SELECT 1 FROM spend_reports WHERE sent = 0 LIMIT 1").toArray().length > 0) await this.reportSoon();
  }

  /** The report not yet taken, or a new one of everything unreported (null: nothing to report). */
  private reportUnderWay(): { seq: number; days: DaySpend[] } | null {
    const open = this.sql.exec<{ seq: number; days: string }>("SELECT seq, days FROM spend_reports WHERE sent = 0").toArray()[0];
    if (open) return { seq: open.seq, days: JSON.parse(open.days) as DaySpend[] };
    const days = this.sql
      .exec<{ day: number; calls: number; cost: number }>("SELECT day, calls, cost FROM unreported_spend ORDER BY day")
      .toArray()
      .map((r) => ({ day: r.day, calls: r.calls, costUsd: r.cost }));
    if (days.length === 0) return null;
    const now = Date.now();
    const seq = this.sql.exec<{ seq: number }>("SELECT COALESCE(MAX(seq), 0) + 1 AS seq FROM spend_reports").one().seq;
    this.sql.exec("DELETE FROM spend_reports WHERE at < ? AND seq < ?", now - KEEP_COUNTED_MS, seq - 1);
    this.sql.exec("INSERT INTO spend_reports (seq, days, sent, at) VALUES (?, ?, 0, ?)", seq, JSON.stringify(days), now);
    this.sql.exec("DELETE FROM unreported_spend");
    return { seq, days };
  }

  /**
   * The platform's ledger takes a tenant ledger's report (`source`: that
   * ledger's object id), once: a report numbered no later than the last one
   * taken from that ledger is a retry, and changes nothing (false).
   */
  async takeSpend(source: string, seq: number, days: DaySpend[]): Promise<boolean> {
    return this.ctx.storage.transactionSync(() => {
      const last = this.sql.exec<{ seq: number }>("SELECT seq FROM spend_sources WHERE source = ?", source).toArray()[0];
      if (last && last.seq >= seq) return false;
      this.sql.exec("INSERT OR REPLACE INTO spend_sources (source, seq) VALUES (?, ?)", source, seq);
      for (const d of days) {
        this.sql.exec(
          "INSERT INTO platform_spend (day, calls, cost) VALUES (?, ?, ?) ON CONFLICT (day) DO UPDATE SET calls = calls + excluded.calls, cost = cost + excluded.cost",
          d.day,
          d.calls,
          d.costUsd,
        );
      }
      return true;
    });
  }

  /**
   * An agent object's busy time per hour, as the object itself sums it: each
   * report carries the hour's total so far, so the larger value stays and a
   * report repeated or out of order changes nothing.
   */
  private busy(tenant: string, agent: string, hours: HourBusy[]): void {
    for (const h of hours) {
      // Already folded into its day (none should come: see FOLD_AFTER_MS).
      if (h.hour < foldLine(Date.now())) continue;
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

  /**
   * Today's (UTC) spend paid with the operator's keys, and the tenant's limit.
   * The platform's ledger adds the tenants' reports to the rows a release
   * before them wrote it (a tenant's has no reports).
   */
  async reading(): Promise<LedgerReading> {
    const day = dayStart(Date.now());
    const models = this.sql.exec<{ cost: number | null }>("SELECT SUM(cost) AS cost FROM usage WHERE byok = 0 AND hour >= ?", day).one().cost ?? 0;
    const machines = this.sql.exec<{ cost: number | null }>("SELECT SUM(cost) AS cost FROM machine_time WHERE hour >= ?", day).one().cost ?? 0;
    const reported = this.sql.exec<{ cost: number | null }>("SELECT SUM(cost) AS cost FROM platform_spend WHERE day >= ?", day).one().cost ?? 0;
    return { day, spentUsd: models + machines + reported, limit: this.limit() };
  }

  async setLimit(limit: TenantLimit | null): Promise<void> {
    if (limit === null) this.sql.exec("DELETE FROM tenant_limit");
    else this.sql.exec("INSERT OR REPLACE INTO tenant_limit (id, value) VALUES (1, ?)", JSON.stringify(limit));
  }

  /** Usage and busy time per hour in [from, to), and per day before the hours folded into days (a day is read whole when the range touches it). */
  async report(from: number, to: number): Promise<UsageReport> {
    const hours = [hourOf(from), to, dayStart(from), to];
    const usage = this.sql
      .exec<{
        hour: number;
        span: Span;
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
        child_calls: number;
        child_cost: number;
      }>("SELECT *, 'hour' AS span FROM usage WHERE hour >= ? AND hour < ? UNION ALL SELECT *, 'day' FROM usage_days WHERE day >= ? AND day < ? ORDER BY hour, agent, model, byok", ...hours)
      .toArray()
      .map((r) => ({
        hour: r.hour,
        span: r.span,
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
        childCalls: r.child_calls,
        childCostUsd: r.child_cost,
      }));
    const busy = this.sql
      .exec<{ hour: number; span: Span; agent: string; busy_ms: number; passes: number; handlers: number }>(
        "SELECT hour, 'hour' AS span, agent, busy_ms, passes, handlers FROM busy WHERE hour >= ? AND hour < ? UNION ALL SELECT day, 'day', agent, busy_ms, passes, handlers FROM busy_days WHERE day >= ? AND day < ? ORDER BY hour, agent",
        ...hours,
      )
      .toArray();
    const parts = this.sql
      .exec<{ hour: number; span: Span; agent: string; part: BusyPart; busy_ms: number }>(
        "SELECT hour, 'hour' AS span, agent, part, busy_ms FROM busy_outside WHERE hour >= ? AND hour < ? UNION ALL SELECT day, 'day', agent, part, busy_ms FROM busy_outside_days WHERE day >= ? AND day < ?",
        ...hours,
      )
      .toArray();
    const outsideOf = (row: { hour: number; span: Span; agent: string }) =>
      Object.fromEntries(parts.filter((p) => p.hour === row.hour && p.span === row.span && p.agent === row.agent).map((p) => [p.part, p.busy_ms]));
    const machines = this.sql
      .exec<{ hour: number; span: Span; agent: string; size: string; machines: number; seconds: number; cost: number }>(
        "SELECT hour, 'hour' AS span, agent, size, machines, seconds, cost FROM machine_time WHERE hour >= ? AND hour < ? UNION ALL SELECT day, 'day', agent, size, machines, seconds, cost FROM machine_time_days WHERE day >= ? AND day < ? ORDER BY hour, agent, size",
        ...hours,
      )
      .toArray()
      .map((r) => ({ hour: r.hour, span: r.span, agent: r.agent, size: r.size, machines: r.machines, seconds: r.seconds, costUsd: r.cost }));
    return {
      usage,
      busy: busy.map((r) => ({ hour: r.hour, span: r.span, agent: r.agent, busyMs: r.busy_ms, passes: r.passes, handlers: r.handlers, outsideTurns: outsideOf(r) })),
      machines,
    };
  }

  /**
   * Folds every hour of the whole UTC days older than FOLD_AFTER_MS into its
   * day, in one transaction: each day's row gains exactly what its hours held,
   * so every total (per tenant, agent, model, day) reads the same after.
   * Returns how many hour rows were folded.
   */
  async fold(now: number): Promise<number> {
    const line = foldLine(now);
    return this.ctx.storage.transactionSync(() => {
      this.sql.exec(
        `INSERT INTO usage_days (tenant, agent, model, day, byok, calls, input_tokens, cache_read_tokens, cache_write_tokens, output_tokens, cost, child_calls, child_cost)
         SELECT tenant, agent, model, ${DAY_OF_HOUR}, byok, SUM(calls), SUM(input_tokens), SUM(cache_read_tokens), SUM(cache_write_tokens), SUM(output_tokens), SUM(cost), SUM(child_calls), SUM(child_cost)
         FROM usage WHERE hour < ? GROUP BY tenant, agent, model, ${DAY_OF_HOUR}, byok
         ON CONFLICT (tenant, agent, model, day, byok) DO UPDATE SET calls = calls + excluded.calls, input_tokens = input_tokens + excluded.input_tokens,
           cache_read_tokens = cache_read_tokens + excluded.cache_read_tokens, cache_write_tokens = cache_write_tokens + excluded.cache_write_tokens,
           output_tokens = output_tokens + excluded.output_tokens, cost = cost + excluded.cost,
           child_calls = child_calls + excluded.child_calls, child_cost = child_cost + excluded.child_cost`,
        line,
      );
      this.sql.exec(
        `INSERT INTO busy_days SELECT tenant, agent, ${DAY_OF_HOUR}, SUM(busy_ms), SUM(passes), SUM(handlers) FROM busy WHERE hour < ? GROUP BY tenant, agent, ${DAY_OF_HOUR}
         ON CONFLICT (tenant, agent, day) DO UPDATE SET busy_ms = busy_ms + excluded.busy_ms, passes = passes + excluded.passes, handlers = handlers + excluded.handlers`,
        line,
      );
      this.sql.exec(
        `INSERT INTO busy_outside_days SELECT tenant, agent, ${DAY_OF_HOUR}, part, SUM(busy_ms) FROM busy_outside WHERE hour < ? GROUP BY tenant, agent, ${DAY_OF_HOUR}, part
         ON CONFLICT (tenant, agent, day, part) DO UPDATE SET busy_ms = busy_ms + excluded.busy_ms`,
        line,
      );
      this.sql.exec(
        `INSERT INTO machine_time_days SELECT tenant, agent, size, ${DAY_OF_HOUR}, SUM(machines), SUM(seconds), SUM(cost) FROM machine_time WHERE hour < ? GROUP BY tenant, agent, size, ${DAY_OF_HOUR}
         ON CONFLICT (tenant, agent, size, day) DO UPDATE SET machines = machines + excluded.machines, seconds = seconds + excluded.seconds, cost = cost + excluded.cost`,
        line,
      );
      const folded = ["usage", "busy", "busy_outside", "machine_time"].reduce((n, table) => n + this.sql.exec(`DELETE FROM ${table} WHERE hour < ? RETURNING 1`, line).toArray().length, 0);
      return folded;
    });
  }

  private limit(): TenantLimit | null {
    const row = this.sql.exec<{ value: string }>("SELECT value FROM tenant_limit").toArray()[0];
    return row ? (JSON.parse(row.value) as TenantLimit) : null;
  }
}

export function dayStart(ms: number): number {
  return Math.floor(ms / DAY_MS) * DAY_MS;
}

/** Hours before this are folded: the whole UTC days older than FOLD_AFTER_MS. */
function foldLine(now: number): number {
  return dayStart(now - FOLD_AFTER_MS);
}

/** A tenant's ledger, or with no tenant the platform's. */
export function ledgerStub(env: Env, tenant?: string): DurableObjectStub<Ledger> {
  const namespace = countedNamespace(env, "Ledger", env.LEDGER as DurableObjectNamespace<Ledger>);
  return namespace.get(namespace.idFromName(tenant === undefined ? "platform" : `tenant:${tenant}`));
}

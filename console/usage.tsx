// A tenant's usage, from its ledger (runtime/metering/ledger.ts): today and the last 30
// days, tokens (with the cached share), cost, the agents' object busy time and machines,
// as a table and small inline SVG bar charts (no script, no style attribute:
// the CSP allows neither).
import { type ConversationView, type UsageRead, type UsageReport, type UsageTotals, totalsOf, unpricedModels, unpricedSentence } from "../runtime/index.ts";
import { usd } from "./layout.tsx";

const DAY_MS = 86_400_000;
const HOUR_MS = 3_600_000;
export const CHART_DAYS = 30;

const COLORS = { input: "#8ab4f8", cached: "#1a73e8", output: "#81c995", cost: "#f29900", machines: "#e52592", busy: "#a142f4" };

export interface Bucket {
  start: number;
  totals: UsageTotals;
}

/** The report's rows summed into `count` buckets of `size` ms from `from`. */
export function buckets(report: UsageReport, from: number, size: number, count: number): Bucket[] {
  return Array.from({ length: count }, (_, i) => {
    const start = from + i * size;
    const inside = (row: { hour: number }) => row.hour >= start && row.hour < start + size;
    return { start, totals: totalsOf({ usage: report.usage.filter(inside), busy: report.busy.filter(inside), machines: report.machines.filter(inside) }) };
  });
}

function cachedShare(t: UsageTotals): string {
  const prompt = t.inputTokens + t.cachedInputTokens + t.cacheWriteTokens;
  return prompt === 0 ? "—" : `${Math.round((100 * t.cachedInputTokens) / prompt)}%`;
}

function busy(ms: number): string {
  return ms >= 10_000 ? `${(ms / 1000).toFixed(1)} s` : `${Math.round(ms)} ms`;
}

function duration(seconds: number): string {
  return seconds >= 3600 ? `${(seconds / 3600).toFixed(1)} h` : seconds >= 60 ? `${(seconds / 60).toFixed(1)} min` : `${Math.round(seconds)} s`;
}

function machineTime(t: UsageTotals): string {
  return t.machines === 0 && t.machineSeconds === 0 ? "—" : `${duration(t.machineSeconds)}, ${usd(t.machineCostUsd)}`;
}

/** `busy`: with the object's busy time and machines (a tenant's); a conversation's rows show its model calls only. */
function SummaryRow(props: { label: string; t: UsageTotals; busy?: false }) {
  const { t } = props;
  return (
    <tr>
      <td>{props.label}</td>
      <td class="num">{t.calls}</td>
      <td class="num">{t.inputTokens + t.cachedInputTokens + t.cacheWriteTokens}</td>
      <td class="num">{cachedShare(t)}</td>
      <td class="num">{t.outputTokens}</td>
      <td class="num">{usd(t.costUsd)}</td>
      {props.busy === false ? null : <td class="num">{busy(t.busyMs)}</td>}
      {props.busy === false ? null : <td class="num">{machineTime(t)}</td>}
    </tr>
  );
}

interface Series {
  label: string;
  color: string;
  value: (t: UsageTotals) => number;
}

const W = 600;
const H = 90;

/** Stacked bars, one per bucket; each bar's numbers in its tooltip. */
function Bars(props: { title: string; buckets: Bucket[]; series: Series[]; format: (n: number) => string; label: (start: number) => string }) {
  const totals = props.buckets.map((b) => props.series.reduce((n, s) => n + s.value(b.totals), 0));
  const max = Math.max(...totals, 0);
  const width = W / props.buckets.length;
  return (
    <figure class="chart">
      <figcaption>
        {props.title} <small>{`(most: ${props.format(max)})`}</small>{" "}
        {props.series.length > 1 ? props.series.map((s) => <small class="key"><svg width="10" height="10" aria-hidden="true"><rect width="10" height="10" fill={s.color} /></svg>{` ${s.label} `}</small>) : null}
      </figcaption>
      <svg viewBox={`0 0 ${W} ${H + 14}`} width="100%" role="img" aria-label={props.title}>
        <line x1="0" y1={H} x2={W} y2={H} stroke="#dadce0" />
        {props.buckets.map((b, i) => {
          let y = H;
          return (
            <g class="bar">
              <title>{`${props.label(b.start)}: ${props.series.map((s) => `${s.label} ${props.format(s.value(b.totals))}`).join(", ")}`}</title>
              {props.series.map((s) => {
                const h = max > 0 ? (s.value(b.totals) / max) * (H - 4) : 0;
                y -= h;
                return h > 0 ? <rect x={(i * width + 1).toFixed(1)} y={y.toFixed(1)} width={Math.max(width - 2, 1).toFixed(1)} height={h.toFixed(1)} fill={s.color} /> : null;
              })}
            </g>
          );
        })}
        <text x="0" y={H + 12} font-size="10" fill="#5f6368">{props.label(props.buckets[0]!.start)}</text>
        <text x={W} y={H + 12} font-size="10" fill="#5f6368" text-anchor="end">{props.label(props.buckets.at(-1)!.start)}</text>
      </svg>
    </figure>
  );
}

const TOKENS: Series[] = [
  { label: "cached input", color: COLORS.cached, value: (t) => t.cachedInputTokens },
  { label: "other input", color: COLORS.input, value: (t) => t.inputTokens + t.cacheWriteTokens },
  { label: "output", color: COLORS.output, value: (t) => t.outputTokens },
];
const COST: Series[] = [{ label: "cost", color: COLORS.cost, value: (t) => t.costUsd }];
const MACHINES: Series[] = [{ label: "machines", color: COLORS.machines, value: (t) => t.machineSeconds }];
const BUSY: Series[] = [{ label: "busy", color: COLORS.busy, value: (t) => t.busyMs }];

const dayLabel = (start: number) => new Date(start).toISOString().slice(0, 10);
const hourLabel = (start: number) => `${new Date(start).toISOString().slice(11, 13)}:00 UTC`;
const count = (n: number) => String(Math.round(n));

/** The usage section of a tenant's page; `read` covers the last 30 days up to now. */
export function UsageSection(props: { read: UsageRead; now: number }) {
  const { read, now } = props;
  const today = Math.floor(now / DAY_MS) * DAY_MS;
  const days = buckets(read.report, today - (CHART_DAYS - 1) * DAY_MS, DAY_MS, CHART_DAYS);
  const hours = buckets(read.report, today, HOUR_MS, 24);
  const month = totalsOf(read.report);
  const limit = read.effective.exempt ? "exempt from limits" : read.effective.dailyUsd === null ? "no daily limit" : `daily limit ${usd(read.effective.dailyUsd)}`;
  return (
    <section class="usage">
      <h3>Usage</h3>
      <p class="muted">{`Spent today with the operator's keys: ${usd(read.reading.spentUsd)} (${limit}). Days are UTC days.`}</p>
      {unpricedModels(read.report).map((model) => (
        <p class="warning">{`Unpriced: ${unpricedSentence(model)}.`}</p>
      ))}
      <table class="usage-summary">
        <thead>
          <tr><th></th><th class="num">Model calls</th><th class="num">Tokens in</th><th class="num">Cached share</th><th class="num">Tokens out</th><th class="num">Cost</th><th class="num">Object busy</th><th class="num">Machines</th></tr>
        </thead>
        <tbody>
          <SummaryRow label="Today" t={days.at(-1)!.totals} />
          <SummaryRow label={`Last ${CHART_DAYS} days`} t={month} />
        </tbody>
      </table>
      {month.calls === 0 && month.busyMs === 0 && month.machines === 0 ? (
        <p class="muted">{`No usage in the last ${CHART_DAYS} days.`}</p>
      ) : (
        <>
          <Bars title={`Tokens per day, last ${CHART_DAYS} days`} buckets={days} series={TOKENS} format={count} label={dayLabel} />
          <Bars title="Cost per day" buckets={days} series={COST} format={usd} label={dayLabel} />
          <Bars title="Object busy time per day" buckets={days} series={BUSY} format={busy} label={dayLabel} />
          {month.machineSeconds > 0 ? <Bars title="Machine time per day" buckets={days} series={MACHINES} format={duration} label={dayLabel} /> : null}
          <Bars title="Tokens per hour, today" buckets={hours} series={TOKENS} format={count} label={hourLabel} />
        </>
      )}
    </section>
  );
}

/** A conversation's model calls as its own rows count them (runtime/models/jobs.ts), in the ledger's terms. */
function conversationTotals(u: ConversationView["usage"]["today"]): UsageTotals {
  return { calls: u.calls, inputTokens: u.input, cachedInputTokens: u.cached, cacheWriteTokens: u.cacheWrite, outputTokens: u.output, costUsd: u.cost, byokCostUsd: 0, busyMs: 0, machines: 0, machineSeconds: 0, machineCostUsd: 0 };
}

/** The usage table of a conversation's page: today and the last 30 days, as a tenant's. */
export function ConversationUsage(props: { usage: ConversationView["usage"] }) {
  return (
    <table class="usage-summary conversation-usage">
      <thead>
        <tr><th></th><th class="num">Model calls</th><th class="num">Tokens in</th><th class="num">Cached share</th><th class="num">Tokens out</th><th class="num">Cost</th></tr>
      </thead>
      <tbody>
        <SummaryRow label="Today" t={conversationTotals(props.usage.today)} busy={false} />
        <SummaryRow label={`Last ${CHART_DAYS} days`} t={conversationTotals(props.usage.last30Days)} busy={false} />
      </tbody>
    </table>
  );
}

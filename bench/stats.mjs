// Small helpers for `npm run bench`: samples, percentiles, intervals, a
// bounded pool of concurrent requests, and the printed table.

/**
 * n, median and p99 of a list of numbers (nearest rank). For a figure where
 * more is better (a speed-up), `higherIsBetter` makes the tail the worst 1 %:
 * p1, shown as such.
 */
export function summary(values, { higherIsBetter = false } = {}) {
  const sorted = [...values].sort((a, b) => a - b);
  const rank = (p) => sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(p * sorted.length) - 1))];
  return higherIsBetter ? { n: sorted.length, median: rank(0.5), p99: rank(0.01), tail: "p1" } : { n: sorted.length, median: rank(0.5), p99: rank(0.99) };
}

/** Runs `task(i)` for i in [0, count) with at most `width` at once; returns the results in order. */
export async function pool(count, width, task) {
  const results = new Array(count);
  let next = 0;
  const worker = async () => {
    while (next < count) {
      const i = next++;
      results[i] = await task(i);
    }
  };
  await Promise.all(Array.from({ length: Math.min(width, count) }, worker));
  return results;
}

/** The total length of a set of [start, end] intervals, overlaps counted once. */
export function unionLength(intervals) {
  const sorted = [...intervals].sort((a, b) => a[0] - b[0]);
  let total = 0;
  let [start, end] = [-Infinity, -Infinity];
  for (const [s, e] of sorted) {
    if (s > end) {
      if (end > start) total += end - start;
      [start, end] = [s, e];
    } else end = Math.max(end, e);
  }
  if (end > start) total += end - start;
  return total;
}

export async function timed(fn) {
  const start = performance.now();
  await fn();
  return performance.now() - start;
}

const fmt = (v, unit) => (unit === "%" ? `${v.toFixed(2)} %` : unit === "ms" ? `${v.toFixed(1)} ms` : unit === "x" ? `${v.toFixed(1)}×` : `${Number(v.toFixed(2))}${unit ? ` ${unit}` : ""}`);

/** One printed figure: name, n, median and p99 (or a single value), and its ratio against the baseline. */
export function row(name, s, unit, ratio, goal) {
  const body = s.median === undefined ? `value ${fmt(s.value, unit)}` : `n ${String(s.n).padStart(4)}  median ${fmt(s.median, unit).padStart(10)}  ${(s.tail ?? "p99").padStart(3)} ${fmt(s.p99, unit).padStart(10)}`;
  const goalText = goal ? `  goal ${goal.text}: ${goal.met ? "met" : "MISSED"}` : "";
  return `  ${name.padEnd(52)} ${body}${ratio ? `  ${ratio}` : ""}${goalText}`;
}

// A node:test reporter beside the usual one (package.json's `npm test`): it
// prints nothing as the tests run, and at the end the ten test files that took
// longest, from the first event heard from a file to its last (each file runs
// in a process of its own, its servers started in its `before`), so the node
// tests' time is a figure people see at every run, as vitest's is
// (scripts/vitest.mjs).
const COUNT = 10;

export default async function* slowest(source) {
  /** file → [first event, last event] (ms). */
  const spans = new Map();
  for await (const event of source) {
    const file = event.data?.file;
    if (!file) continue;
    const now = Date.now();
    const span = spans.get(file);
    if (span) span[1] = now;
    else spans.set(file, [now, now]);
  }
  const cwd = `${process.cwd()}/`;
  const rows = [...spans].map(([file, [from, to]]) => [file.startsWith(cwd) ? file.slice(cwd.length) : file, to - from]).sort((a, b) => b[1] - a[1]).slice(0, COUNT);
  if (rows.length === 0) return;
  const width = Math.max(...rows.map(([file]) => file.length));
  yield `\nThe ${rows.length} slowest test files (node --test, from the first event of each file to its last):\n`;
  for (const [file, ms] of rows) yield `  ${file.padEnd(width)}  ${(ms / 1000).toFixed(1).padStart(6)} s\n`;
}

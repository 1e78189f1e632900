// A node:test reporter beside the usual one (package.json's `npm test`): it
// prints nothing as the tests run, and at the end the ten test files that took
// longest (each file runs in a process of its own, and node:test reports it as
// a test named by its path, its duration that process's, its `before` with its
// servers included), so the node tests' time is a figure people see at every
// run, as vitest's is (scripts/vitest.mjs).
const COUNT = 10;

export default async function* slowest(source) {
  /** file → its duration (ms). */
  const durations = new Map();
  for await (const event of source) {
    const { name, file, details } = event.data ?? {};
    if (!file || name !== file || !["test:complete", "test:pass", "test:fail"].includes(event.type)) continue;
    if (typeof details?.duration_ms === "number") durations.set(file, details.duration_ms);
  }
  const cwd = `${process.cwd()}/`;
  const rows = [...durations].map(([file, ms]) => [file.startsWith(cwd) ? file.slice(cwd.length) : file, ms]).sort((a, b) => b[1] - a[1]).slice(0, COUNT);
  if (rows.length === 0) return;
  const width = Math.max(...rows.map(([file]) => file.length));
  yield `\nThe ${rows.length} slowest test files (node --test, each file's process):\n`;
  for (const [file, ms] of rows) yield `  ${file.padEnd(width)}  ${(ms / 1000).toFixed(1).padStart(6)} s\n`;
}

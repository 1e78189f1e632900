// The layout is the architecture (docs/design.md, "Rooms"): the runtime in a
// few rooms, one concern each and each with a door, naming no platform, and
// every configuration variable read in a config.ts. Import rules (circles, doors, who may import whom) are
// dependency-cruiser's, run by `npm test` before this (.dependency-cruiser.cjs).
import assert from "node:assert/strict";
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join, relative } from "node:path";
import { test } from "node:test";
import { createRequire } from "node:module";
import { bindings, configReads } from "./config-reads.mjs";

const ROOT = new URL("../..", import.meta.url).pathname;
const { FLOORS } = createRequire(import.meta.url)("../../.dependency-cruiser.cjs");
const SOURCE_FOLDERS = ["runtime", "bridges", "console", "plugins", "approvals", "machines", "lib"];
const MAX_TOP_FILES = 4;
const MAX_ROOMS = 15;
const LONG_FILE_LINES = 600;

function filesUnder(dir, ext = /\.(ts|tsx)$/) {
  return readdirSync(join(ROOT, dir)).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(join(ROOT, path)).isDirectory()) return filesUnder(path, ext);
    return ext.test(name) && !/\.test\.ts$/.test(name) ? [path] : [];
  });
}
const lines = (path) => readFileSync(join(ROOT, path), "utf8").split("\n").length - 1;

test("runtime/ holds its rooms, each with a door, and at most four files of its own (its door and leaf contracts)", () => {
  const entries = readdirSync(join(ROOT, "runtime"));
  const files = entries.filter((name) => !statSync(join(ROOT, "runtime", name)).isDirectory());
  assert.ok(files.includes("index.ts"), "runtime/index.ts is the runtime's door");
  assert.ok(files.length <= MAX_TOP_FILES, `runtime/ has ${files.length} files directly in it (${files.join(", ")}); at most ${MAX_TOP_FILES}`);
  const rooms = entries.filter((name) => statSync(join(ROOT, "runtime", name)).isDirectory());
  assert.ok(rooms.length > 0);
  for (const room of rooms) assert.ok(readdirSync(join(ROOT, "runtime", room)).includes("index.ts"), `runtime/${room} has no index.ts`);
});

test("runtime/ names no platform: each bridge says what it is through the contract (runtime/chat.ts) and registers in one line (bridges/index.ts)", () => {
  const bridgeNames = readdirSync(join(ROOT, "bridges")).filter((name) => statSync(join(ROOT, "bridges", name)).isDirectory() && name !== "shared");
  assert.ok(bridgeNames.length >= 3);
  for (const path of filesUnder("runtime")) {
    const text = readFileSync(join(ROOT, path), "utf8");
    for (const name of bridgeNames) assert.ok(!text.includes(`"${name}"`), `${path} names the ${name} bridge ("${name}")`);
  }
});

test(`runtime/ is at most ${MAX_ROOMS} rooms, split by concern, never by size; a file past ${LONG_FILE_LINES} lines is named (a warning)`, () => {
  const rooms = readdirSync(join(ROOT, "runtime")).filter((name) => statSync(join(ROOT, "runtime", name)).isDirectory());
  assert.ok(rooms.length <= MAX_ROOMS, `runtime/ has ${rooms.length} rooms (${rooms.join(", ")}); at most ${MAX_ROOMS}`);
  // Each has its floor in .dependency-cruiser.cjs, whose rule no-arrows-up keeps imports pointing down.
  assert.deepEqual([...rooms].sort(), [...FLOORS].sort(), "every room has a floor in .dependency-cruiser.cjs (FLOORS), and every floor a room");
  const long = SOURCE_FOLDERS.flatMap((dir) => filesUnder(dir)).filter((path) => lines(path) > LONG_FILE_LINES);
  for (const path of long) console.warn(`warning: ${path} is ${lines(path)} lines; a file that long may hold two concerns`);
});

test("every configuration variable and named secret is read in a config.ts, nowhere else", () => {
  const bound = bindings();
  assert.ok(bound.has("AGENT") && bound.has("EFFECT_QUEUE"), "the bindings are read from wrangler.jsonc");
  const found = [];
  for (const path of [...SOURCE_FOLDERS.flatMap((dir) => filesUnder(dir)), "worker.ts"]) {
    if (path.endsWith("/config.ts") || path === "lib/config.ts") continue;
    for (const name of configReads(readFileSync(join(ROOT, path), "utf8"), bound)) found.push(`${relative(ROOT, join(ROOT, path))}: ${name}`);
  }
  assert.deepEqual(found, []);
});

test("the config-read check sees each way of reading a variable", () => {
  const bound = new Set(["AGENT"]);
  assert.deepEqual(configReads('c.env.SLACK_AGENT; env.AGENT; (env as unknown as Record<string, unknown>).X_Y; secretNamed(env, "TOKEN")', bound), ["SLACK_AGENT", "TOKEN", "X_Y"]);
});

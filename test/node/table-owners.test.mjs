// Each SQLite table has one owner (docs/design.md, "Rooms"): the room whose
// file holds its CREATE TABLE is the only one whose code runs SQL on it; other
// rooms ask that room through its door. A room is a folder under runtime/
// (runtime/<room>/) or approvals/. A trigger is declared with the table it
// writes (the feed's, on the store's log and approvals' holds): the table it
// watches is not a query. SQL that takes its table from a variable is out of
// sight here but for lib/conversation-rows.ts, which each owner makes for its
// own table by name (retention moves a conversation's rows with it).
import assert from "node:assert/strict";
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";

const ROOT = new URL("../..", import.meta.url).pathname;

function filesUnder(dir) {
  return readdirSync(join(ROOT, dir)).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(join(ROOT, path)).isDirectory()) return filesUnder(path);
    return /\.ts$/.test(name) && !/\.test\.ts$/.test(name) ? [path] : [];
  });
}

/** runtime/<room>/… → "runtime/<room>"; approvals/… → "approvals"; a file directly in runtime/ is in no room. */
const roomOf = (path) => (path.startsWith("approvals/") ? "approvals" : path.split("/").length > 2 ? path.split("/").slice(0, 2).join("/") : path);

/** The code without its comments (prose may name a table); SQL in strings stays. */
const code = (path) =>
  readFileSync(join(ROOT, path), "utf8")
    .replace(/\/\*[\s\S]*?\*\//g, "")
    .replace(/(^|\s)\/\/.*$/gm, "$1");

const DECLARED = /\bCREATE\s+TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?"?(\w+)/g;
const WATCHED = /\b(?:AFTER|BEFORE|INSTEAD\s+OF)\s+(?:INSERT|DELETE|UPDATE(?:\s+OF\s+\w+(?:\s*,\s*\w+)*)?)\s+ON\s+"?\w+"?/g;
const NAMED = /\b(?:FROM|INTO|UPDATE|JOIN|TABLE|ON)\s+"?(\w+)|\bnew ConversationRows\([^,()]+,\s*"(\w+)"/g;

const files = ["runtime", "approvals"].flatMap(filesUnder).map((path) => ({ path, room: roomOf(path), text: code(path) }));

/** Each table and the room that declares it; a table declared in two rooms is reported. */
function owners() {
  const owner = new Map();
  const twice = [];
  for (const { path, room, text } of files) {
    for (const [, table] of text.matchAll(DECLARED)) {
      const known = owner.get(table);
      if (known && known.room !== room) twice.push(`${table}: declared in ${known.path} and ${path}`);
      else if (!known) owner.set(table, { room, path });
    }
  }
  return { owner, twice };
}

test("every table is declared by one room", () => {
  const { owner, twice } = owners();
  assert.ok(owner.has("conversations") && owner.has("holds"), "the agent object's tables are found");
  assert.deepEqual(twice, []);
});

test("a table is queried only by the room that declares it; others ask that room", () => {
  const { owner } = owners();
  const foreign = [];
  for (const { path, room, text } of files) {
    for (const [, named, rows] of text.replace(WATCHED, "").matchAll(NAMED)) {
      const table = named ?? rows;
      const declared = owner.get(table);
      if (declared && declared.room !== room) foreign.push(`${path} runs SQL on ${table}, which ${declared.room} owns (${declared.path}): ask it through its door`);
    }
  }
  assert.deepEqual([...new Set(foreign)], []);
});

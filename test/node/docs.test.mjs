// The docs hold together: every relative link and #anchor in README.md and
// docs/*.md resolves, and docs/configuration.md has one row for each variable
// and secret the code reads (the config.ts files and wrangler.jsonc's "vars").
import assert from "node:assert/strict";
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { test } from "node:test";
import { bindings, configNames, wranglerVars } from "./config-reads.mjs";

const ROOT = new URL("../..", import.meta.url).pathname;
const PAGES = ["README.md", ...readdirSync(join(ROOT, "docs")).filter((name) => name.endsWith(".md")).map((name) => `docs/${name}`)];

/** The text outside fenced code blocks, line for line (fenced lines blanked). */
function prose(text) {
  let fenced = false;
  return text.split("\n").map((line) => {
    if (/^\s*```/.test(line)) { fenced = !fenced; return ""; }
    return fenced ? "" : line;
  });
}

/** A heading's anchor as GitHub makes it: the text as shown, lower case, punctuation dropped, spaces as hyphens. */
export function slug(heading) {
  const shown = heading.replace(/!?\[([^\]]*)\]\([^)]*\)/g, "$1").replace(/<[^>]+>/g, "").replace(/[`*]/g, "").trim();
  return shown.toLowerCase().replace(/[^\p{L}\p{N}\p{M}\s_-]/gu, "").replace(/ /g, "-");
}

/** Every anchor a page has, duplicates numbered as GitHub numbers them (-1, -2…). */
function anchors(path) {
  const seen = new Map();
  const found = new Set();
  for (const line of prose(readFileSync(join(ROOT, path), "utf8"))) {
    const heading = line.match(/^#{1,6}\s+(.*?)\s*#*\s*$/);
    if (!heading) continue;
    const base = slug(heading[1]);
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    found.add(n === 0 ? base : `${base}-${n}`);
  }
  return found;
}

/** The relative links of a page: `[text](target)` outside code, with their line. */
function links(path) {
  return prose(readFileSync(join(ROOT, path), "utf8")).flatMap((line, i) =>
    [...line.replace(/`[^`]*`/g, "").matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)]
      .map((m) => m[1])
      .filter((target) => !/^[a-z][a-z0-9+.-]*:/i.test(target))
      .map((target) => ({ target, where: `${path}:${i + 1}` })),
  );
}

test("every relative link and #anchor in README.md and docs/ resolves", () => {
  const broken = [];
  for (const page of PAGES) {
    for (const { target, where } of links(page)) {
      const [file, anchor] = target.split("#");
      const path = file ? relative(ROOT, join(ROOT, dirname(page), decodeURIComponent(file))) : page;
      if (!existsSync(join(ROOT, path))) { broken.push(`${where}: ${target} (no ${path})`); continue; }
      if (anchor === undefined || !path.endsWith(".md") || statSync(join(ROOT, path)).isDirectory()) continue;
      if (!anchors(path).has(decodeURIComponent(anchor).toLowerCase())) broken.push(`${where}: ${target} (no heading #${anchor} in ${path})`);
    }
  }
  assert.deepEqual(broken, []);
});

test("the anchor check slugs headings as GitHub does", () => {
  assert.equal(slug("Who may do what"), "who-may-do-what");
  assert.equal(slug("1. Create the application"), "1-create-the-application");
  assert.equal(slug("Inbound: `POST /webhook/{tenant}/events`"), "inbound-post-webhooktenantevents");
  assert.equal(slug("Running locally: `npm start`"), "running-locally-npm-start");
  assert.equal(slug("I want to…"), "i-want-to");
});

function configFiles(dir) {
  return readdirSync(join(ROOT, dir)).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(join(ROOT, path)).isDirectory()) return name === "node_modules" ? [] : configFiles(path);
    return name === "config.ts" ? [path] : [];
  });
}

test("every variable the code reads has exactly one row in docs/configuration.md", () => {
  const bound = bindings();
  const read = new Set(wranglerVars());
  for (const path of ["runtime", "bridges", "console", "machines", "lib", "plugins", "approvals"].flatMap(configFiles)) {
    for (const name of configNames(readFileSync(join(ROOT, path), "utf8"), bound)) read.add(name);
  }
  assert.ok(read.has("ADMIN_TOKEN") && read.has("MODEL_PROVIDERS") && read.has("TENANT_SECRETS_KEY"), "the config reads are found");
  const rows = prose(readFileSync(join(ROOT, "docs/configuration.md"), "utf8"))
    .map((line) => line.match(/^\|\s*`([A-Z][A-Z0-9_]*)`\s*\|/)?.[1])
    .filter(Boolean);
  const count = (name) => rows.filter((row) => row === name).length;
  const missing = [...read].filter((name) => count(name) === 0).sort();
  const repeated = [...read].filter((name) => count(name) > 1).sort();
  assert.deepEqual(missing, [], "variables the code reads with no row in docs/configuration.md");
  assert.deepEqual(repeated, [], "variables with more than one row in docs/configuration.md");
});

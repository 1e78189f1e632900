// How the tests find the configuration the code reads: layout.test.mjs checks
// that only config.ts files read it, docs.test.mjs that docs/configuration.md
// has a row for each name.
import { readFileSync } from "node:fs";
import { join } from "node:path";

const ROOT = new URL("../..", import.meta.url).pathname;

/** Bindings are not configuration: the Worker's objects, queues and buckets, as wrangler.jsonc names them. */
export function bindings() {
  const text = readFileSync(join(ROOT, "wrangler.jsonc"), "utf8");
  return new Set([...text.matchAll(/"(?:name|binding)":\s*"([A-Z][A-Z0-9_]*)"/g)].map((m) => m[1]));
}

/** Each read of a variable or a named secret: `env.NAME`, `(… env …).NAME`, `secretNamed(env, "NAME")`. */
export function configReads(source, bound) {
  const reads = [
    ...[...source.matchAll(/\benv\)?\.([A-Z][A-Z0-9_]*)\b/g)].map((m) => m[1]),
    ...[...source.matchAll(/\bsecretNamed\([^,()]+,\s*["'`]([A-Z][A-Z0-9_]*)["'`]/g)].map((m) => m[1]),
    ...[...source.matchAll(/as Record<string, [^>]+>\)\.([A-Z][A-Z0-9_]*)\b/g)].map((m) => m[1]),
  ];
  return reads.filter((name) => !bound.has(name));
}


/** The names a config.ts reads: configReads' ways, and its helpers' (`requiredSecret(env, "NAME"…`, `parseJsonVar("NAME"…`, `booleanVar("NAME"…`). */
export function configNames(source, bound) {
  return [
    ...configReads(source, bound),
    ...[...source.matchAll(/\brequiredSecret\([^,()]+,\s*["'`]([A-Z][A-Z0-9_]*)["'`]/g)].map((m) => m[1]),
    ...[...source.matchAll(/\b[a-z][A-Za-z]*Var\(\s*["'`]([A-Z][A-Z0-9_]*)["'`]/g)].map((m) => m[1]),
  ].filter((name) => !bound.has(name));
}

/** The variables wrangler.jsonc sets under "vars". */
export function wranglerVars() {
  const text = readFileSync(join(ROOT, "wrangler.jsonc"), "utf8");
  const block = text.slice(text.indexOf('"vars"'));
  return [...block.slice(0, block.indexOf("}")).matchAll(/"([A-Z][A-Z0-9_]*)":/g)].map((m) => m[1]);
}

// Run after every install (package.json "postinstall"): mends one line of
// @cloudflare/vitest-pool-workers 0.15.1, the version the toolchain pins.
//
// Its Durable Object wrapper puts a Proxy on the class's prototype in the
// constructor, so every object constructed wraps the previous wrapper: after N
// objects of a class, each property read runs N nested traps. A test that
// makes a few hundred couriers (issue 23's burst) slowed to a crawl, workerd's
// one thread spending 95 % of its time in those traps (perf), and the tests
// timed out. cloudflare/workers-sdk#15092; fixed upstream by #15106 (install
// the proxy once per class), which this applies to the pinned version.
import { readFileSync, writeFileSync } from "node:fs";
import { fileURLToPath } from "node:url";

const FILE = fileURLToPath(new URL("../node_modules/@cloudflare/vitest-pool-workers/dist/worker/lib/cloudflare/test-internal.mjs", import.meta.url));
const BROKEN = "\tfunction Class(...args) {\n\t\tClass.prototype = new Proxy(Class.prototype, {";
const MENDED = "\tlet prototypeProxied = false;\n\tfunction Class(...args) {\n\t\tif (!prototypeProxied && (prototypeProxied = true)) Class.prototype = new Proxy(Class.prototype, {";

const source = readFileSync(FILE, "utf8");
if (source.includes(MENDED)) process.exit(0);
if (!source.includes(BROKEN)) {
  // A version with the upstream fix (or another shape): nothing to mend here, but say so.
  console.warn(`patch-test-pool: ${FILE} no longer has the line it mends; if the pool is upgraded, drop this script.`);
  process.exit(0);
}
writeFileSync(FILE, source.replace(BROKEN, MENDED));
console.log("patch-test-pool: the test pool's Durable Object wrapper installs its prototype proxy once (workers-sdk#15092)");

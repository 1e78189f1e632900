// Before Miniflare starts: its loopback server must keep idle connections (why: the script).
import "./scripts/loopback-keep-alive.mjs";
import { cloudflareTest } from "@cloudflare/vitest-pool-workers";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { defineConfig } from "vitest/config";
import { unstable_readConfig } from "wrangler";
// @ts-expect-error: plain ESM helper shared with the Node tests
import { startFakes } from "./test/fakes/index.mjs";
// @ts-expect-error: plain ESM helper
import { startMachineHost } from "./test/machines/host.mjs";
// @ts-expect-error: plain ESM helper
import { stateTmpdir } from "./test/node/wrangler-dev.mjs";

// Miniflare keeps the objects' state under the temp folder: in memory where there is one (why: stateTmpdir).
process.env.TMPDIR = stateTmpdir();

// The fakes (model provider, Slack, Discord, callback receiver) are real HTTP
// servers on loopback, started once here so their URLs can be bound into the Worker.
// So is the real machine host (bubblewrap), the `machine` plugin's local backend.
const { bindings } = await startFakes();
const machineHost = await startMachineHost();

// The Worker's bundle swaps some modules for those in build/ (wrangler.jsonc,
// "alias"): the tests run with the same swaps, so they test what is deployed.
const root = dirname(fileURLToPath(import.meta.url));
const alias: Record<string, string> = unstable_readConfig({ config: join(root, "wrangler.jsonc") }).alias ?? {};

// Each swap matches its exact name: the bundle could not be built with a subpath of one
// (ajv/dist/2020 would be build/index.ts/dist/2020), so only test code imports such a subpath
// (the OpenAPI validator, test/runtime/edge/agents-api.test.ts) and it gets the real module.
const exactly = (name: string) => new RegExp(`^${name.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}$`);

export default defineConfig({
  resolve: {
    alias: Object.entries(alias).map(([find, replacement]) => ({ find: exactly(find), replacement: join(root, replacement) })),
  },
  plugins: [
    cloudflareTest({
      main: "./test/worker-under-test.ts",
      wrangler: { configPath: "./wrangler.jsonc" },
      miniflare: { bindings: { ...bindings, ...machineHost.bindings } },
    }),
  ],
  test: {
    include: ["test/**/*.test.ts"],
    // Two test files at once (vitest's default is one on a 2-core machine: cores - 1). The files
    // mostly wait on their fakes and timers, so two share the cores well: 455 s for the suite
    // against 740-772 s one at a time, the same 597 tests green (docs/testing.md).
    maxWorkers: 2,
    testTimeout: 30_000,
    hookTimeout: 30_000,
    onUnhandledError(err) {
      // workers-sdk#14736: a rejected DO RPC (or a reset object) is also reported as unhandled.
      const e = err as Error & { remote?: boolean; durableObjectReset?: boolean };
      if (e.remote === true || e.durableObjectReset === true) return false;
    },
  },
});

// What the Worker's bundle has in place of modules it never runs (wrangler.jsonc,
// "alias"; the tests get the same swaps, vitest.config.ts). The Gemini SDK's
// stand-in, which does run, is gemini.ts.

/**
 * ajv and ajv-formats. The MCP SDK imports them for its default validator, but
 * plugins/mcp.ts hands its clients @cfworker/json-schema's instead: ajv
 * compiles schemas with `new Function`, which workerd forbids, and is 290 KB.
 * Reaching this is a bug: the SDK built its default validator after all.
 */
export default function unbundled(): never {
  throw new Error("ajv is not bundled in the Worker: give the MCP client a jsonSchemaValidator (plugins/mcp.ts)");
}

/**
 * pi-ai's model registry (its models.generated.js, 430 KB): empty. pi-ai's
 * provider entries import its models.js for calculateCost, which reads the
 * model it is given, never the registry. The model table reads its own reduced
 * copy (runtime/models/registry.json, scripts/model-registry.mjs).
 */
export const MODELS = {};

// What the Worker's bundle has in place of pi-ai's model registry
// (models.generated.js, 430 KB; wrangler.jsonc, "alias"): nothing. pi-ai's
// provider entries import its models.js for calculateCost, which reads the
// model it is given, never the registry. The model table reads its own reduced
// copy (runtime/models/registry.json, scripts/model-registry.mjs).
export const MODELS = {};

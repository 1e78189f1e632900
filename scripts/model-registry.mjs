// Writes runtime/models/registry.json: pi-ai's model registry reduced to what
// the model table reads (runtime/models/table.ts), for every model it lists.
// pi-ai's own (models.generated.js) holds names, base URLs and headers besides,
// and is kept out of the Worker's bundle (wrangler.jsonc, "alias").
// Run it after updating @mariozechner/pi-ai; test/runtime/models/providers.test.ts fails until then.
import { writeFileSync } from "node:fs";
import { MODELS } from "../node_modules/@mariozechner/pi-ai/dist/models.generated.js";

/** Every API the registry's models are called with; a row names its API by index here. */
const APIS = [...new Set(Object.values(MODELS).flatMap((models) => Object.values(models).map((model) => model.api)))].sort();

/**
 * A registry model as a row of the table (ModelSettings) and the API it is
 * called with (its compat flags hold for that API only), as an array in the
 * order of COLUMNS: a third of the size of the same as objects, in the bundle.
 */
function row(id, model) {
  const { input, output, cacheRead, cacheWrite } = model.cost;
  const flags = model.thinkingLevelMap || model.compat ? [model.thinkingLevelMap ?? null, model.compat ?? null] : [];
  return [id, APIS.indexOf(model.api), model.contextWindow, model.maxTokens, input, output, cacheRead, cacheWrite, model.input.includes("image") ? 1 : 0, model.reasoning ? 1 : 0, ...flags];
}

const COLUMNS = "id, api (index into apis), contextWindow, maxTokens, cost input, output, cacheRead, cacheWrite (USD per million tokens), images (1/0), reasoning (1/0), [thinkingLevelMap, compat]";
// One model a line: an update of pi-ai reads as a diff of the models it changed.
const providers = Object.entries(MODELS).map(([provider, models]) => {
  const lines = Object.entries(models).map(([id, model]) => `      ${JSON.stringify(row(id, model))}`);
  return `    ${JSON.stringify(provider)}: [\n${lines.join(",\n")}\n    ]`;
});
const target = new URL("../runtime/models/registry.json", import.meta.url);
writeFileSync(target, `{\n  "columns": ${JSON.stringify(COLUMNS)},\n  "apis": ${JSON.stringify(APIS)},\n  "providers": {\n${providers.join(",\n")}\n  }\n}\n`);
console.log(`${target.pathname}: ${Object.values(MODELS).reduce((n, models) => n + Object.keys(models).length, 0)} models of ${providers.length} providers`);

// Writes runtime/models/registry.json: pi-ai's model registry reduced to what
// the model table reads (runtime/models/table.ts), for every model it lists.
// pi-ai's own (models.generated.js) holds names, base URLs and headers besides,
// and is kept out of the Worker's bundle (wrangler.jsonc, "alias").
// Run it after updating @mariozechner/pi-ai; test/providers.test.ts fails until then.
import { writeFileSync } from "node:fs";
import { MODELS } from "../node_modules/@mariozechner/pi-ai/dist/models.generated.js";

/** A registry model as a row of the table (ModelSettings) and the API it is called with (its compat flags hold for that API only). */
function row(model) {
  return {
    api: model.api,
    contextWindow: model.contextWindow,
    maxTokens: model.maxTokens,
    cost: model.cost,
    images: model.input.includes("image"),
    reasoning: model.reasoning,
    ...(model.thinkingLevelMap ? { thinkingLevelMap: model.thinkingLevelMap } : {}),
    ...(model.compat ? { compat: model.compat } : {}),
  };
}

// One model a line: an update of pi-ai reads as a diff of the models it changed.
const providers = Object.entries(MODELS).map(([provider, models]) => {
  const lines = Object.entries(models).map(([id, model]) => `    ${JSON.stringify(id)}: ${JSON.stringify(row(model))}`);
  return `  ${JSON.stringify(provider)}: {\n${lines.join(",\n")}\n  }`;
});
const target = new URL("../runtime/models/registry.json", import.meta.url);
writeFileSync(target, `{\n${providers.join(",\n")}\n}\n`);
console.log(`${target.pathname}: ${Object.values(MODELS).reduce((n, models) => n + Object.keys(models).length, 0)} models of ${providers.length} providers`);

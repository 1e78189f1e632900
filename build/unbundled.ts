// What the Worker's bundle has in place of ajv and ajv-formats (wrangler.jsonc,
// "alias"). The MCP SDK imports them for its default validator, but
// plugins/mcp.ts hands its clients @cfworker/json-schema's instead: ajv
// compiles schemas with `new Function`, which workerd forbids, and is 290 KB.
// Reaching this is a bug: the SDK built its default validator after all.
export default function unbundled(): never {
  throw new Error("ajv is not bundled in the Worker: give the MCP client a jsonSchemaValidator (plugins/mcp.ts)");
}

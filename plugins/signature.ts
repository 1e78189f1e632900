// JSON Schema (as zod's toJSONSchema writes it) in TypeScript-like form: the
// way a model reads a function's parameters best, and in fewer tokens.

type Schema = Record<string, unknown>;

/** The TypeScript-like type of a JSON Schema; what it cannot express is `unknown`. */
export function typeOf(schema: unknown): string {
  if (schema === true || schema === undefined) return "unknown";
  if (schema === false) return "never";
  if (!isSchema(schema)) return "unknown";
  if ("const" in schema) return JSON.stringify(schema.const);
  if (Array.isArray(schema.enum)) return schema.enum.map((v) => JSON.stringify(v)).join(" | ");
  const union = (schema.anyOf ?? schema.oneOf) as unknown[] | undefined;
  if (Array.isArray(union)) return union.map((s) => typeOf(s)).join(" | ");
  if (Array.isArray(schema.type)) return schema.type.map((type) => typeOf({ ...schema, type })).join(" | ");
  switch (schema.type) {
    case "string":
      return "string";
    case "number":
    case "integer":
      return "number";
    case "boolean":
      return "boolean";
    case "null":
      return "null";
    case "array":
      return arrayType(schema);
    case "object":
      return objectType(schema);
    default:
      return "unknown";
  }
}

function arrayType(schema: Schema): string {
  if (Array.isArray(schema.prefixItems)) return `[${schema.prefixItems.map((s) => typeOf(s)).join(", ")}]`;
  const item = typeOf(schema.items);
  return item.includes(" ") ? `(${item})[]` : `${item}[]`;
}

function objectType(schema: Schema): string {
  const properties = isSchema(schema.properties) ? Object.entries(schema.properties) : [];
  const extra = schema.additionalProperties;
  // A record names its values' schema; an object with no fields names none.
  if (properties.length === 0) return extra === true || isSchema(extra) ? `Record<string, ${typeOf(extra)}>` : "{}";
  const required = new Set(Array.isArray(schema.required) ? schema.required : []);
  const fields = properties.map(([key, value]) => {
    const name = /^[A-Za-z_$][\w$]*$/.test(key) ? key : JSON.stringify(key);
    const note = isSchema(value) && typeof value.description === "string" ? ` /* ${value.description.replaceAll("*/", "* /")} */` : "";
    return `${name}${required.has(key) ? "" : "?"}: ${typeOf(value)}${note}`;
  });
  return `{ ${fields.join("; ")} }`;
}

function isSchema(value: unknown): value is Schema {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

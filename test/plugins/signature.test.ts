// The TypeScript-like form code mode shows the model, from the JSON Schema zod writes.
import { describe, expect, it } from "vitest";
import * as z from "zod";
import { typeOf } from "../../plugins/signature.ts";

// As the gateway makes it: the input a caller may send.
const shown = (schema: z.ZodType) => typeOf(z.toJSONSchema(schema, { io: "input" }));

describe("a tool's parameters in TypeScript-like form", () => {
  it("shows objects with optional fields, descriptions, records, arrays, unions, literals and enums", () => {
    expect(shown(z.object({ url: z.string().describe("https only"), headers: z.record(z.string(), z.string()).optional() }))).toBe(
      "{ url: string /* https only */; headers?: Record<string, string> }",
    );
    expect(shown(z.object({ ids: z.array(z.number().int()), pairs: z.array(z.union([z.string(), z.null()])) }))).toBe("{ ids: number[]; pairs: (string | null)[] }");
    expect(shown(z.object({ mode: z.enum(["fast", "safe"]), kind: z.literal("x"), "odd-key": z.boolean().default(false) }))).toBe(
      '{ mode: "fast" | "safe"; kind: "x"; "odd-key"?: boolean }',
    );
    expect(shown(z.tuple([z.string(), z.number()]))).toBe("[string, number]");
    expect(shown(z.object({}))).toBe("{}");
    expect(shown(z.any())).toBe("unknown");
  });

  it("keeps a description from closing its comment", () => {
    expect(shown(z.object({ a: z.string().describe("ends */ early") }))).toBe("{ a: string /* ends * / early */ }");
  });
});

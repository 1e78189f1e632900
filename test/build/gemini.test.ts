// The Worker's Gemini client (build/gemini.ts) held to the real @google/genai
// SDK it replaces: both call the same loopback Gemini (test/fakes) with the
// same request, pi-ai-shaped, and must send the same thing and hand back the
// same chunks and errors.
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
// The real SDK by its subpath: the bare name is swapped for build/gemini.ts (wrangler.jsonc, "alias").
import * as sdk from "@google/genai/web";
import * as ours from "../../build/gemini.ts";
import { convertMessages, convertTools } from "../../node_modules/@mariozechner/pi-ai/dist/providers/google-shared.js";
import type { Context, Model } from "@mariozechner/pi-ai";
import { providerRequests, script, unique } from "../support.ts";

const testEnv = env as unknown as Record<string, string>;
const model = { id: "gemini-2.5-flash", api: "google-generative-ai", provider: "google", reasoning: true, input: ["text", "image"] } as unknown as Model<"google-generative-ai">;
type Client = { models: { generateContentStream(params: unknown): Promise<AsyncIterable<unknown>> } };
const clients: Record<string, (options: unknown) => Client> = {
  sdk: (options) => new sdk.GoogleGenAI(options as ConstructorParameters<typeof sdk.GoogleGenAI>[0]) as unknown as Client,
  ours: (options) => new ours.GoogleGenAI(options as ConstructorParameters<typeof ours.GoogleGenAI>[0]) as unknown as Client,
};

/** A request as pi-ai's Gemini entry builds it: a tool round trip with a thought signature, a picture, tools, thinking. */
function params(scenario: string) {
  const context: Context = {
    systemPrompt: "You keep the ledger.",
    messages: [
      { role: "user", content: [{ type: "text", text: `[s:${scenario}] how many apples?` }, { type: "image", data: "iVBORw0KGgo=", mimeType: "image/png" }], timestamp: 1 },
      {
        role: "assistant",
        content: [
          { type: "thinking", thinking: "Look it up.", thinkingSignature: "c2lnbmF0dXJl" },
          { type: "toolCall", id: "call_1", name: "ledger__read", arguments: { entry: "apples" }, thoughtSignature: "c2lnbmF0dXJl" },
        ],
        api: "google-generative-ai",
        provider: "google",
        model: model.id,
        usage: { input: 1, output: 1, cacheRead: 0, cacheWrite: 0, totalTokens: 2, cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 } },
        stopReason: "toolUse",
        timestamp: 2,
      },
      { role: "toolResult", toolCallId: "call_1", toolName: "ledger__read", content: [{ type: "text", text: "7 apples" }], isError: false, timestamp: 3 },
    ],
    tools: [{ name: "ledger__read", description: "Reads an entry", parameters: { type: "object", properties: { entry: { type: "string" } }, required: ["entry"] } as never }],
  };
  return {
    model: model.id,
    contents: convertMessages(model, context),
    config: {
      temperature: 0.2,
      maxOutputTokens: 512,
      systemInstruction: context.systemPrompt,
      tools: convertTools(context.tools!),
      toolConfig: { functionCallingConfig: { mode: ours.FunctionCallingConfigMode.AUTO } },
      thinkingConfig: { includeThoughts: true, thinkingBudget: 1024 },
      abortSignal: new AbortController().signal,
    },
  };
}

const options = () => ({ apiKey: testEnv.FAKE_PROVIDER_KEY, httpOptions: { baseUrl: `${testEnv.FAKE_PROVIDER_URL}/v1beta`, apiVersion: "" } });

/** A chunk's wire fields (the SDK's objects also carry the HTTP response they came in). */
const wire = (chunk: unknown) => {
  const { sdkHttpResponse: _, ...fields } = JSON.parse(JSON.stringify(chunk)) as Record<string, unknown>;
  return fields;
};

async function answer(client: Client, scenario: string): Promise<unknown[] | { thrown: { name: string; message: string; status: unknown } }> {
  try {
    const chunks: unknown[] = [];
    for await (const chunk of await client.models.generateContentStream(params(scenario))) chunks.push(wire(chunk));
    return chunks;
  } catch (err) {
    const e = err as Error & { status?: unknown };
    return { thrown: { name: e.name, message: e.message, status: e.status } };
  }
}

describe("build/gemini.ts against @google/genai", () => {
  it("sends the same request and reads the same chunks", async () => {
    const results: Record<string, unknown> = {};
    for (const name of ["sdk", "ours"]) {
      const s = unique(`gemini-${name}`);
      await script(s, [{ text: "There are seven apples.", toolCalls: [{ name: "ledger__read", arguments: { entry: "pears" } }], usage: { input: 40, cached: 8, output: 12 } }]);
      const chunks = await answer(clients[name]!(options()), s);
      const [request] = await providerRequests(s);
      // The scenario id differs by name: each body is compared with it put back to one.
      results[name] = { chunks, path: request!.path, authorized: request!.authorized, body: JSON.parse(JSON.stringify(request!.body).replaceAll(s, "S")) };
    }
    expect((results.ours as { chunks: unknown[] }).chunks.length).toBeGreaterThan(1);
    const strip = (r: unknown) => JSON.parse(JSON.stringify(r).replace(/"responseId":"[^"]*"/g, '"responseId":"R"'));
    expect(strip(results.ours)).toEqual(strip(results.sdk));
  });

  it("fails as the SDK does when a begun answer is an error", async () => {
    const results: Record<string, unknown> = {};
    for (const name of ["sdk", "ours"]) {
      const s = unique(`gemini-midway-${name}`);
      await script(s, [{ errorInStream: 500 }]);
      results[name] = JSON.parse(JSON.stringify(await answer(clients[name]!(options()), s)).replaceAll(s, "S"));
    }
    expect(results.ours).toMatchObject({ thrown: { name: "ApiError", status: 500 } });
    expect(results.ours).toEqual(results.sdk);
  });

  it.each([
    [429, "Resource has been exhausted (e.g. check quota).", { retryDelay: "7s" }],
    [400, "API key not valid. Please pass a valid API key.", {}],
    [503, "The model is overloaded.", {}],
  ])("fails as the SDK does on a %i", async (status, error, extra) => {
    const results: Record<string, unknown> = {};
    for (const name of ["sdk", "ours"]) {
      const s = unique(`gemini-${status}-${name}`);
      await script(s, [{ status, error, ...extra }]);
      results[name] = JSON.parse(JSON.stringify(await answer(clients[name]!(options()), s)).replaceAll(s, "S"));
    }
    expect(results.ours).toMatchObject({ thrown: { name: "ApiError", status } });
    expect(results.ours).toEqual(results.sdk);
  });
});

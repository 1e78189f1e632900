// Pictures (issue 26, part 3): an MCP tool's image is stored once in R2 under
// the agent, the transcript keeps its reference, and the courier reads it
// back into the request of a model that takes images (the fake provider sees
// the bytes); a text-only model is told in its place that it cannot see it.
// The newest MODEL_IMAGES_MAX (8) images go: the ninth moves the window, and
// until it does each request repeats the one before it as its prefix.
// (A Slack file's image: test/bridges/slack/files.test.ts.)
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import type { Message } from "@mariozechner/pi-ai";
import { leftOut, picturesIn, storeImage } from "../../../runtime/store/index.ts";
import { chooseModels, postMessage, providerRequests, script, settled, unique, worker, type ProviderRequest, type ScriptStep } from "../../support.ts";

const E = env as unknown as Record<string, string> & { LARGE_VALUES: R2Bucket };
const ADMIN = { authorization: "Bearer test-admin-token", "content-type": "application/json" };
const REFERENCE = { alias: "ref", plugin: "mcp", config: { url: E.MCP_EVERYTHING_URL } };
const IMAGE_CALL: ScriptStep = { toolCalls: [{ name: "ref__get-tiny-image", arguments: {} }] };
const NOT_SEEN = "(image not shown: this model cannot see images)";

/** One turn over the Agents API with the reference MCP server mounted; the requests the fake provider saw. */
async function turn(tenant: string, agent: string, steps: ScriptStep[]): Promise<ProviderRequest[]> {
  const res = await worker(`/v1/tenants/${tenant}/agents/${agent}/mounts`, { method: "PUT", headers: ADMIN, body: JSON.stringify([REFERENCE]) });
  expect(res.status, await res.clone().text()).toBe(200);
  const s = unique("pictures");
  const conversation = unique("c");
  await script(s, steps);
  await postMessage(tenant, agent, { text: `[s:${s}] go`, conversation });
  expect((await settled(tenant, agent, conversation)).status).toBe("idle");
  return providerRequests(s);
}

/** The base64 of each image a request carried (Anthropic's `source.data`, at any depth), in order. */
function imagesIn(value: unknown): string[] {
  if (Array.isArray(value)) return value.flatMap(imagesIn);
  if (value === null || typeof value !== "object") return [];
  const v = value as { type?: unknown; source?: { data?: unknown } };
  if (v.type === "image" && typeof v.source?.data === "string") return [v.source.data];
  return Object.values(value).flatMap(imagesIn);
}

/** A request's messages without Anthropic's cache breakpoints (they mark its last message, so they move each call). */
const messagesOf = (request: ProviderRequest) => JSON.parse(JSON.stringify(request.body.messages, (key, v: unknown) => (key === "cache_control" ? undefined : v))) as unknown[];

async function storedImages(tenant: string, agent: string): Promise<string[]> {
  return (await E.LARGE_VALUES.list({ prefix: `images/${tenant}/${agent}/` })).objects.map((o) => o.key);
}

describe("pictures", () => {
  it("an MCP image reaches an image model as image input, stored once; the ninth image moves the window, and until then each request's prefix is the one before", async () => {
    const tenant = unique("vision");
    await chooseModels({ [tenant]: "fake-anthropic/claude-sonnet-4-5" });
    const requests = await turn(tenant, "viewer", [...Array.from({ length: 9 }, () => IMAGE_CALL), { text: "Nine dots." }]);
    expect(requests).toHaveLength(10);

    // Nine calls, one picture: its bytes are in R2 once, under the agent, and they are what the provider saw.
    const keys = await storedImages(tenant, "viewer");
    expect(keys).toHaveLength(1);
    const stored = await (await E.LARGE_VALUES.get(keys[0]!))!.arrayBuffer();
    const data = btoa(String.fromCharCode(...new Uint8Array(stored)));
    expect(data).toMatch(/^iVBORw0KGgo/);
    expect(keys[0]).toBe(`images/${tenant}/viewer/${[...new Uint8Array(await crypto.subtle.digest("SHA-256", stored))].map((b) => b.toString(16).padStart(2, "0")).join("")}`);

    // Request k carries the k images so far, up to eight, each prefix unchanged (from the second: the first's lone message is sent as plain text).
    for (let k = 1; k <= 8; k++) {
      expect(imagesIn(requests[k]!.body.messages)).toEqual(Array(k).fill(data));
      if (k > 1) expect(messagesOf(requests[k]!).slice(0, messagesOf(requests[k - 1]!).length)).toEqual(messagesOf(requests[k - 1]!));
      expect(JSON.stringify(requests[k]!.body)).not.toContain("image not shown");
    }
    // The ninth moves the window by four: five are left, the four oldest told as a sentence.
    const ninth = requests[9]!;
    expect(imagesIn(ninth.body.messages)).toEqual(Array(5).fill(data));
    expect(JSON.stringify(ninth.body).match(/only the newest 8 images, at most 8 MiB, reach the model/g)).toHaveLength(4);
    expect(messagesOf(ninth).slice(0, 2)).toEqual(messagesOf(requests[8]!).slice(0, 2));
    expect(messagesOf(ninth)[2]).not.toEqual(messagesOf(requests[8]!)[2]);
  });

  it("a text-only model is told, in place of the MCP image, that it cannot see it", async () => {
    const tenant = unique("textonly");
    // Text only (the table's default), with a window the reference server's long tool list leaves room in (no compaction between).
    await chooseModels({ [tenant]: "fake/long-context" });
    const requests = await turn(tenant, "reader", [IMAGE_CALL, { text: "I cannot see it." }]);
    const body = JSON.stringify(requests[1]!.body);
    expect(body).toContain("[image 1: image/png, ");
    expect(body).toContain(NOT_SEEN);
    expect(body).not.toContain("iVBORw0KGgo");
    expect(await storedImages(tenant, "reader")).toHaveLength(1);
  });

  it("the window leaves images out half the count at a time, within the bytes too, and never shrinks as images join", () => {
    const limits = { count: 8, bytes: 100 };
    expect(leftOut([], limits)).toBe(0);
    expect(leftOut(Array(8).fill(1), limits)).toBe(0);
    expect(leftOut(Array(9).fill(1), limits)).toBe(4);
    expect(leftOut(Array(12).fill(1), limits)).toBe(4);
    expect(leftOut(Array(13).fill(1), limits)).toBe(8);
    // 60 + 50 bytes are over 100: the first four go.
    expect(leftOut([60, 1, 1, 1, 50], limits)).toBe(4);
    let before = 0;
    const sizes: number[] = [];
    for (const size of [30, 5, 70, 1, 1, 90, 2, 2, 2, 2, 2, 2, 2, 2, 2, 40, 40]) {
      sizes.push(size);
      const now = leftOut(sizes, limits);
      expect(now).toBeGreaterThanOrEqual(before);
      before = now;
    }
  });

  it("an image kept inline by an earlier release still goes; one whose stored copy is gone, or too large alone, is told as a sentence", async () => {
    const route = { tenant: unique("inline"), agent: "a" };
    const limits = { count: 8, bytes: 2048 };
    const small = await storeImage(E.LARGE_VALUES, route, new Uint8Array([1, 2, 3]), "image/png");
    const gone = await storeImage(E.LARGE_VALUES, route, new Uint8Array([4, 5, 6]), "image/png");
    await E.LARGE_VALUES.delete(`images/${route.tenant}/a/${gone.ref}`);
    const large = await storeImage(E.LARGE_VALUES, route, new Uint8Array(4096), "image/png");
    const inline = { type: "image" as const, data: "AAEC", mimeType: "image/gif" };
    const messages: Message[] = [{ role: "user", content: [inline, small, gone, large, { type: "text", text: "four" }], timestamp: 0 }];
    const [sent] = await picturesIn(E.LARGE_VALUES, route, true, limits, messages);
    expect(sent!.content).toEqual([
      inline,
      { type: "image", data: "AQID", mimeType: "image/png" },
      { type: "text", text: "(image not shown: its stored copy is gone)" },
      { type: "text", text: "(image not shown: larger than the 2 KiB of images a request carries)" },
      { type: "text", text: "four" },
    ]);
  });
});

// Bad input to /v1 gets a 4xx that says what was wrong, never a 500, and writes nothing.
import { describe, expect, it } from "vitest";
import { agentExists, tables } from "../../agents.ts";
import { chooseModels, PNG, script, settled, sharedWithModel, unique, withVars, worker } from "../../support.ts";

const PATH = "/v1/tenants/inputs/agents/guard/messages";
const AUTH = { authorization: "Bearer test-admin-token" };

async function post(body: BodyInit, headers: Record<string, string>) {
  const res = await worker(PATH, { method: "POST", headers, body });
  return { status: res.status, error: ((await res.json()) as { error?: string }).error ?? "" };
}

describe("/v1 input checks", () => {
  it("no token → 401; wrong token → 401", async () => {
    expect(await post('{"text":"hi"}', { "content-type": "application/json" })).toEqual({ status: 401, error: expect.stringMatching(/missing bearer token/) });
    expect(await post('{"text":"hi"}', { "content-type": "application/json", authorization: "Bearer nope" })).toEqual({ status: 401, error: "wrong bearer token" });
    const get = await worker("/v1/tenants/inputs/agents/guard/conversations/x");
    expect(get.status).toBe(401);
  });

  it("malformed JSON → 400", async () => {
    const r = await post('{"text": "hi",', { ...AUTH, "content-type": "application/json" });
    expect(r.status).toBe(400);
    expect(r.error).toMatch(/malformed JSON/);
  });

  it("missing or empty text → 400 naming the field", async () => {
    const r = await post('{"conversation":"c-missing"}', { ...AUTH, "content-type": "application/json" });
    expect(r.status).toBe(400);
    expect(r.error).toMatch(/text/);
    expect((await post('{"text":"   "}', { ...AUTH, "content-type": "application/json" })).status).toBe(400);
  });

  it("an interrupt needs no text, but must name its conversation → 400 otherwise", async () => {
    const r = await post('{"kind":"interrupt"}', { ...AUTH, "content-type": "application/json" });
    expect(r).toEqual({ status: 400, error: expect.stringMatching(/an interrupt names the conversation it stops/) });
    expect((await post('{"kind":"steer","conversation":"c-steer"}', { ...AUTH, "content-type": "application/json" })).error).toMatch(/text/);
  });

  it("a command (stop, compact, status) must name its conversation and a known command → 400 otherwise", async () => {
    const json = { ...AUTH, "content-type": "application/json" };
    expect(await post('{"kind":"command","command":"compact"}', json)).toEqual({ status: 400, error: expect.stringMatching(/a command names its conversation/) });
    expect((await post('{"kind":"command","command":"shred","conversation":"c-cmd"}', json)).status).toBe(400);
  });

  it("a body over 64 KiB → 413", async () => {
    const r = await post(JSON.stringify({ text: "x".repeat(70 * 1024) }), { ...AUTH, "content-type": "application/json" });
    expect(r.status).toBe(413);
    expect(r.error).toMatch(/65536/);
  });

  it("wrong content type → 415; bad names → 400; unknown kind → 400", async () => {
    expect((await post("text=hi", { ...AUTH, "content-type": "application/x-www-form-urlencoded" })).status).toBe(415);
    const badTenant = await worker("/v1/tenants/bad%20name/agents/guard/messages", { method: "POST", headers: { ...AUTH, "content-type": "application/json" }, body: '{"text":"hi"}' });
    expect(badTenant.status).toBe(400);
    expect((await post('{"text":"hi","kind":"shout"}', { ...AUTH, "content-type": "application/json" })).status).toBe(400);
    expect((await post('{"text":"hi","conversation":"no spaces allowed"}', { ...AUTH, "content-type": "application/json" })).status).toBe(400);
  });

  it("none of the rejected requests wrote anything", async () => {
    // The object has not even been asked: it holds nothing, not even its schema.
    expect(await tables("inputs", "guard")).toEqual([]);
  });

  it("an unknown route → 404 with the route named", async () => {
    const res = await worker("/nope", { method: "POST" });
    expect(res.status).toBe(404);
    expect(await res.json()).toEqual({ error: "no route for POST /nope" });
  });

  it("GET …/mounts when MOUNTS names an unknown plugin → 503 configuration error naming MOUNTS", async () => {
    await withVars({ MOUNTS: JSON.stringify([{ alias: "clock", plugin: "clock" }, { alias: "gone", plugin: "no-such-plugin" }]) }, async () => {
      const res = await worker("/v1/tenants/inputs/agents/guard/mounts", { headers: AUTH });
      expect(res.status).toBe(503);
      expect(((await res.json()) as { error: string }).error).toBe('configuration error: MOUNTS: alias "gone" names unknown plugin "no-such-plugin"');
    });
    expect((await worker("/v1/tenants/inputs/agents/guard/mounts", { headers: AUTH })).status).toBe(200);
  });
});

describe("files sent with a message", () => {
  it("a picture inline reaches a model that takes images as image input, a text file as text", async () => {
    const tenant = unique("api-files");
    await chooseModels({ [tenant]: "fake-anthropic/claude-sonnet-4-5" });
    const s = unique("api-files");
    await script(s, [{ text: "A dot, and the answer." }]);
    const attachments = [
      { name: "dot.png", type: "image/png", data: PNG },
      { name: "notes.txt", type: "text/plain", data: Buffer.from("the answer is 42").toString("base64") },
    ];
    const res = await worker(`/v1/tenants/${tenant}/agents/guard/messages`, { method: "POST", headers: { ...AUTH, "content-type": "application/json" }, body: JSON.stringify({ text: `[s:${s}] look`, conversation: s, attachments }) });
    expect(res.status).toBe(202);
    await settled(tenant, "guard", s);
    const { parts, text } = await sharedWithModel(s);
    expect(parts).toContainEqual(expect.objectContaining({ type: "image", source: { type: "base64", media_type: "image/png", data: PNG } }));
    expect(text).toContain("the answer is 42");
  });

  it("a file of another type, or whose data is not base64, is a 400 naming it; nothing is written", async () => {
    for (const [file, says] of [
      [{ name: "a.zip", type: "application/zip", data: "AAAA" }, "type is one of image/png"],
      [{ name: "a.png", type: "image/png", data: "not base64!" }, "data is the file's bytes in base64"],
    ] as const) {
      const r = await worker("/v1/tenants/inputs-files/agents/guard/messages", { method: "POST", headers: { ...AUTH, "content-type": "application/json" }, body: JSON.stringify({ text: "look", conversation: "c-files", attachments: [file] }) });
      expect(r.status).toBe(400);
      expect(await r.text()).toContain(says);
    }
    expect(await agentExists("inputs-files", "guard")).toBe(false);
  });
});

// Invariant 4: one object per (tenant, agent), which records its identity on
// first use and refuses any other.
import { env } from "cloudflare:workers";
import { runInDurableObject } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { agent, tables } from "../../agents.ts";
import { postMessage, script, settled, unique, worker } from "../../support.ts";

describe("structural tenancy", () => {
  it("an object refuses a request for another identity", async () => {
    const stub = agent("tenant-a", "shared-name");
    const event = { id: unique("ev"), kind: "message" as const, conversation: "c1", text: "hi", user: { platform: "api" as const, id: "u" } };
    await runInDurableObject(stub, (instance) => instance.submit({ tenant: "tenant-a", agent: "shared-name" }, { ...event, id: unique("ev") }));
    await expect(runInDurableObject(stub, (instance) => instance.submit({ tenant: "tenant-b", agent: "shared-name" }, event))).rejects.toThrow(
      /belongs to tenant "tenant-a" agent "shared-name"; refused a request for tenant "tenant-b"/,
    );
    await expect(runInDurableObject(stub, (instance) => instance.conversations({ tenant: "tenant-a", agent: "other" }))).rejects.toThrow(/refused/);
  });

  it("a read of an unknown tenant's agent (a conversation, the console's list) writes nothing, and claims no identity", async () => {
    const ghost = unique("ghost");
    const bearer = { authorization: "Bearer test-admin-token" };
    // Locally an object's file exists once it is instantiated; what matters is that nothing was written into it.
    expect((await worker(`/v1/tenants/${ghost}/agents/reader/conversations/c1`, { headers: bearer })).status).toBe(404);
    const page = await worker(`/console/tenants/${ghost}/agents/reader`, { headers: bearer });
    expect(await page.text()).toContain("No conversations yet.");
    expect(await tables(ghost, "reader")).toEqual([]);
    // The object still refuses another identity once one is recorded by a write.
    const s = unique("first");
    await script(s, [{ text: "hello" }]);
    await postMessage(ghost, "reader", { text: `[s:${s}] hi`, conversation: s });
    await settled(ghost, "reader", s);
    expect(await tables(ghost, "reader")).toContain("meta");
    await expect(runInDurableObject(agent(ghost, "reader"), (instance) => instance.conversations({ tenant: "someone-else", agent: "reader" }))).rejects.toThrow(/refused/);
  });

  it("tenants A and B with the same agent name are two objects whose transcripts never mix", async () => {
    const conversation = unique("same");
    const a = unique("sa");
    const b = unique("sb");
    await script(a, [{ text: "answer for A" }]);
    await script(b, [{ text: "answer for B" }]);
    await postMessage("tenant-a", "twin", { text: `[s:${a}] secret of A`, conversation });
    await postMessage("tenant-b", "twin", { text: `[s:${b}] secret of B`, conversation });
    const viewA = await settled("tenant-a", "twin", conversation);
    const viewB = await settled("tenant-b", "twin", conversation);
    expect(viewA.transcript.map((e) => e.text)).toEqual([`[s:${a}] secret of A`, "answer for A"]);
    expect(viewB.transcript.map((e) => e.text)).toEqual([`[s:${b}] secret of B`, "answer for B"]);
    expect(agent("tenant-a", "twin").id.equals(agent("tenant-b", "twin").id)).toBe(false);
    const ns = env.AGENT as unknown as DurableObjectNamespace;
    expect(ns.idFromName("tenant-a:twin").equals(agent("tenant-a", "twin").id)).toBe(true);
  });
});

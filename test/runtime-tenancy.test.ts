// Invariant 4: one object per (tenant, agent), which records its identity on
// first use and refuses any other.
import { env } from "cloudflare:workers";
import { runInDurableObject } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { agent } from "./agents.ts";
import { postMessage, script, settled, unique } from "./support.ts";

describe("structural tenancy", () => {
  it("an object refuses a request for another identity", async () => {
    const stub = agent("tenant-a", "shared-name");
    const event = { id: unique("ev"), kind: "message" as const, conversation: "c1", text: "hi", user: { platform: "api" as const, id: "u" } };
    await runInDurableObject(stub, (instance) => instance.conversations({ tenant: "tenant-a", agent: "shared-name" }));
    await expect(runInDurableObject(stub, (instance) => instance.submit({ tenant: "tenant-b", agent: "shared-name" }, event))).rejects.toThrow(
      /belongs to tenant "tenant-a" agent "shared-name"; refused a request for tenant "tenant-b"/,
    );
    await expect(runInDurableObject(stub, (instance) => instance.conversations({ tenant: "tenant-a", agent: "other" }))).rejects.toThrow(/refused/);
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

// Model choice per deployment, tenant and agent (the most specific wins), and
// bring-your-own-key: a choice names the Worker secret of the tenant's key,
// never the key. The next model call runs on the new choice.
import { describe, expect, it } from "vitest";
import { postMessage, providerRequests, script, settled, unique, withVars, worker } from "../../support.ts";

const ADMIN = { authorization: "Bearer test-admin-token", "content-type": "application/json" };

function choose(path: string, body: unknown): Promise<Response> {
  return worker(`/v1/tenants/${path}/model`, { method: "PUT", headers: ADMIN, body: JSON.stringify(body) });
}

async function modelOf(tenant: string, agent: string): Promise<{ effective: { model: string } }> {
  return (await worker(`/v1/tenants/${tenant}/agents/${agent}/model`, { headers: ADMIN })).json();
}

/** The API the fake provider was spoken to in for one message of a fresh conversation. */
async function apiUsed(tenant: string, agent: string): Promise<string | undefined> {
  const s = unique("pick");
  await script(s, [{ text: "ok" }]);
  await postMessage(tenant, agent, { text: `[s:${s}] hi`, conversation: s });
  await settled(tenant, agent, s);
  return (await providerRequests(s))[0]?.api;
}

describe("model choice", () => {
  it("agent overrides tenant overrides deployment, and the next call runs on the new choice", async () => {
    const tenant = unique("pick-t");
    expect((await modelOf(tenant, "a")).effective.model).toBe("fake/test-model");
    expect(await apiUsed(tenant, "a")).toBe("openai-completions");

    expect((await choose(tenant, { model: "fake-anthropic/claude-sonnet-4-5" })).status).toBe(200);
    expect((await modelOf(tenant, "a")).effective.model).toBe("fake-anthropic/claude-sonnet-4-5");
    expect(await apiUsed(tenant, "a")).toBe("anthropic-messages");

    expect((await choose(`${tenant}/agents/b`, { model: "fake-gemini/gemini-2.5-flash" })).status).toBe(200);
    expect(await apiUsed(tenant, "b")).toBe("google-generative-ai");
    expect(await apiUsed(tenant, "a")).toBe("anthropic-messages");

    expect((await worker(`/v1/tenants/${tenant}/agents/b/model`, { method: "DELETE", headers: ADMIN })).status).toBe(200);
    expect(await apiUsed(tenant, "b")).toBe("anthropic-messages");
  });

  it("a choice naming an unknown provider or model, or a key instead of a secret's name, is refused", async () => {
    const tenant = unique("pick-bad");
    const unknownProvider = await choose(tenant, { model: "nowhere/gpt-4.1" });
    expect(unknownProvider.status).toBe(400);
    expect(((await unknownProvider.json()) as { error: string }).error).toMatch(/provider "nowhere", which is not in MODEL_PROVIDERS/);
    const unknownModel = await choose(tenant, { model: "fake-anthropic/claude-imaginary-9" });
    expect(unknownModel.status).toBe(400);
    expect(((await unknownModel.json()) as { error: string }).error).toMatch(/model "claude-imaginary-9" is not one provider "fake-anthropic" lists/);
    expect((await choose(tenant, { model: "fake/test-model", secret: "sk-live-1234" })).status).toBe(400);
    expect((await choose(tenant, { model: "local", secret: "TENANT_KEY" })).status).toBe(400);
    expect((await modelOf(tenant, "a")).effective.model).toBe("fake/test-model");
  });

  it("HARNESS_MODEL is checked as an admin's choice is: a model neither listed nor known is refused by name", async () => {
    const tenant = unique("harness");
    await withVars({ HARNESS_MODEL: "fake/imaginary-9" }, async () => {
      const res = await worker(`/v1/tenants/${tenant}/agents/a/model`, { headers: ADMIN });
      expect(res.status).toBe(503);
      expect(((await res.json()) as { error: string }).error).toBe(
        `configuration error: HARNESS_MODEL: model "imaginary-9" is not one provider "fake" lists in MODEL_PROVIDERS (under "models") nor one pi-ai knows there`,
      );
      const s = unique("harness");
      await script(s, [{ text: "never" }]);
      await postMessage(tenant, "a", { text: `[s:${s}] hi`, conversation: s });
      const view = await settled(tenant, "a", s);
      expect(view.status).toBe("failed");
      expect(view.error).toMatch(/HARNESS_MODEL: model "imaginary-9" is not one provider "fake" lists/);
      expect(await providerRequests(s)).toEqual([]);
    });
    expect((await modelOf(tenant, "a")).effective.model).toBe("fake/test-model");
  });

  it("bring your own key: the tenant's secret is the one the provider sees", async () => {
    const tenant = unique("byok");
    // The platform names a Worker secret that does not exist: its call is refused at once, naming it.
    expect((await choose(tenant, { model: "fake/test-model", secret: "TENANT_KEY_UNSET" })).status).toBe(200);
    const s = unique("byok");
    await script(s, [{ text: "never" }]);
    await postMessage(tenant, "a", { text: `[s:${s}] hi`, conversation: s });
    const view = await settled(tenant, "a", s);
    expect(view.status).toBe("failed");
    expect(view.error).toMatch(/not configured: the Worker secret TENANT_KEY_UNSET of the model choice is not set/);
    expect(await providerRequests(s)).toEqual([]);
    // With the operator's key named as the tenant's own, the call goes through.
    expect((await choose(tenant, { model: "fake/test-model", secret: "FAKE_PROVIDER_KEY" })).status).toBe(200);
    expect(await apiUsed(tenant, "a")).toBe("openai-completions");
  });
});

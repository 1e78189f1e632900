// Starts every loopback fake the workerd tests talk to, and names the Worker
// bindings that point at them. Each bridge adds its fake here.
import { startLedger } from "./ledger.mjs";
import { FAKE_PROVIDER_KEY, startModelProvider } from "./model-provider.mjs";

export async function startFakes() {
  const provider = await startModelProvider();
  const ledger = await startLedger();
  const fakes = { provider, ledger };
  const bindings = {
    ADMIN_TOKEN: "test-admin-token",
    MODEL_PROVIDERS: JSON.stringify([{ id: "fake", baseUrl: `${provider.url}/v1`, auth: { secret: "FAKE_PROVIDER_KEY" } }]),
    HARNESS_MODEL: "fake/test-model",
    FAKE_PROVIDER_KEY,
    MODEL_RETRY_BASE_SECONDS: "0",
    FAKE_PROVIDER_URL: provider.url,
    FAKE_LEDGER_URL: ledger.url,
    MOUNTS: JSON.stringify([{ alias: "clock", plugin: "clock" }, { alias: "ledger", plugin: "ledger", config: { url: ledger.url } }]),
  };
  return { fakes, bindings, close: () => Promise.all(Object.values(fakes).map((f) => f.close())) };
}

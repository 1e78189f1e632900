// Starts every loopback fake the workerd tests talk to (and the reference MCP
// server, which is real), and names the Worker bindings that point at them.
// Each bridge adds its fake here.
import { startLedger } from "./ledger.mjs";
import { startCallbackReceiver, WEBHOOK_SECRET } from "./callback.mjs";
import { DISCORD_APPLICATION_ID, DISCORD_BOT_TOKEN, DISCORD_PUBLIC_KEY, DISCORD_TEST_SIGNING_KEY, startDiscord } from "./discord.mjs";
import { FAKE_DISCORD_CLIENT_SECRET, startDiscordOAuth } from "./discord-oauth.mjs";
import { startEverything } from "./everything.mjs";
import { startGchat } from "./gchat.mjs";
import { MCP_API_TOKEN, startMcp } from "./mcp.mjs";
import { FAKE_PROVIDER_KEY, FAKE_TENANT_KEY, startModelProvider } from "./model-provider.mjs";
import { REMOTE_API_TOKEN, startRemote } from "./remote.mjs";
import { startContainers } from "./containers.mjs";
import { startSlackOidc } from "./slack-oidc.mjs";
import { startTeams, TEAMS_APP_ID, TEAMS_APP_PASSWORD } from "./teams.mjs";
import { startTelegram, TELEGRAM_BOTS, TELEGRAM_WEBHOOK_SECRET } from "./telegram.mjs";
import { FAKE_SLACK_BOT_TOKEN, FAKE_SLACK_CLIENT_ID, FAKE_SLACK_CLIENT_SECRET, FAKE_SLACK_SIGNING_SECRET, startSlack } from "./slack.mjs";

/** `gates` (test/fakes/gates.mjs), when given, lets a harness watch and hold requests. */
export async function startFakes({ gates } = {}) {
  // A Node process that takes a second or so to start: under way while the others start.
  const starting = startEverything();
  const provider = await startModelProvider({ gates });
  const ledger = await startLedger({ gates });
  const slack = await startSlack({ gates });
  const slackOidc = await startSlackOidc();
  const discord = await startDiscord({ gates });
  const discordOAuth = await startDiscordOAuth();
  const callback = await startCallbackReceiver({ gates });
  const telegram = await startTelegram({ gates });
  const gchat = await startGchat({ gates });
  const teams = await startTeams({ gates });
  const remote = await startRemote();
  const mcp = await startMcp();
  const everything = await starting;
  const containers = await startContainers();
  const fakes = { provider, ledger, slack, slackOidc, discord, discordOAuth, callback, telegram, gchat, teams, remote, mcp, everything, containers };
  const remoteHost = new URL(remote.url).host;
  const bindings = {
    ADMIN_TOKEN: "test-admin-token",
    TENANT_SECRETS_KEY: "test-tenant-secrets-key",
    // A Worker secret the platform grants to one tenant only (test/runtime/control/tenant-secrets.test.ts).
    GITHUB_TOKEN: "canary-github-token-in-the-environment",
    SECRET_GRANTS: JSON.stringify({ "granted-tenant": ["GITHUB_TOKEN"] }),
    MODEL_PROVIDERS: JSON.stringify([
      // A small context window, so compaction can be shown with a message of a few pages;
      // a price for its one model, as an operator prices a gateway's model pi-ai does not know.
      // Two more models in that window: one with a small output budget and one with a large one (compaction's triggers).
      {
        id: "fake",
        baseUrl: `${provider.url}/v1`,
        auth: { secret: "FAKE_PROVIDER_KEY" },
        contextWindow: 8000,
        models: {
          "test-model": { cost: { input: 0.5, output: 1.5, cacheRead: 0.05 } },
          "small-output": { maxTokens: 500 },
          "big-output": { maxTokens: 6000 },
          // A window that holds a request over 1 MiB (one kept in R2).
          "long-context": { contextWindow: 1_000_000 },
        },
      },
      // The other APIs, each serving a model pi-ai's registry knows (so its prices come from there).
      { id: "fake-responses", api: "openai-responses", baseUrl: `${provider.url}/v1`, auth: { secret: "FAKE_PROVIDER_KEY" } },
      { id: "fake-anthropic", api: "anthropic-messages", baseUrl: provider.url, auth: { secret: "FAKE_PROVIDER_KEY" } },
      { id: "fake-gemini", api: "google-generative-ai", baseUrl: `${provider.url}/v1beta`, auth: { secret: "FAKE_PROVIDER_KEY" } },
      // The provider-gate tests' own, one for each API: they rate-limit these keys on purpose, and a key's gate is
      // one object for the whole run (every test file shares the runtime), so no other test's turns wait behind
      // their limits, nor take the probe after one (a call of another file whose object its test evicts never
      // says how it went, and holds the key's waiting turns for the probe's 30 s lease).
      { id: "fake-gated", baseUrl: `${provider.url}/v1`, auth: { secret: "FAKE_PROVIDER_KEY" }, models: { "test-model": {} } },
      { id: "fake-gated-responses", api: "openai-responses", baseUrl: `${provider.url}/v1`, auth: { secret: "FAKE_PROVIDER_KEY" } },
      { id: "fake-gated-anthropic", api: "anthropic-messages", baseUrl: provider.url, auth: { secret: "FAKE_PROVIDER_KEY" } },
      { id: "fake-gated-gemini", api: "google-generative-ai", baseUrl: `${provider.url}/v1beta`, auth: { secret: "FAKE_PROVIDER_KEY" } },
    ]),
    HARNESS_MODEL: "fake/test-model",
    FAKE_PROVIDER_KEY,
    // A tenant's own key (bring your own key): the fake provider limits it apart from the operator's.
    FAKE_TENANT_KEY,
    MODEL_RETRY_BASE_SECONDS: "0",
    // Short, so a send whose answer is held is given up (and found again) within a test.
    SEND_TIMEOUT_SECONDS: "3",
    FAKE_PROVIDER_URL: provider.url,
    FAKE_LEDGER_URL: ledger.url,
    MOUNTS: JSON.stringify([
      { alias: "clock", plugin: "clock" },
      { alias: "memory", plugin: "memory" },
      { alias: "js", plugin: "js" },
      { alias: "ledger", plugin: "ledger", config: { url: ledger.url } },
      // A second mount of the same plugin is a second authority: this one's writes wait for a person.
      { alias: "vault", plugin: "ledger", config: { url: ledger.url }, policy: { write: "approval" } },
      { alias: "api", plugin: "http", config: { allowedHosts: [remoteHost] }, secret_ref: "REMOTE_API_TOKEN" },
      { alias: "hooks", plugin: "http", config: { allowedHosts: [remoteHost] }, secret_ref: "REMOTE_API_TOKEN", policy: { write: "allow" } },
    ]),
    REMOTE_API_TOKEN,
    FAKE_REMOTE_URL: remote.url,
    MCP_API_TOKEN,
    FAKE_MCP_URL: mcp.url,
    MCP_EVERYTHING_URL: everything.url,
    MCP_EVERYTHING_CONTROL_URL: everything.controlUrl,
    FAKE_CONTAINERS_URL: containers.url,
    APPROVERS: JSON.stringify({ approvals: ["U_APPROVER", "D_APPROVER"], T_APPROVALS: ["U_APPROVER"], "424242": ["U_APPROVER", "1400000000000000042"], console_ok: ["console:admin"], T1: ["U1"] }),
    SLACK_API_BASE_URL: `${slack.url}/api`,
    SLACK_SIGNING_SECRET: FAKE_SLACK_SIGNING_SECRET,
    SLACK_BOT_TOKEN: FAKE_SLACK_BOT_TOKEN,
    SLACK_CLIENT_ID: FAKE_SLACK_CLIENT_ID,
    SLACK_CLIENT_SECRET: FAKE_SLACK_CLIENT_SECRET,
    SLACK_TOKEN_ENCRYPTION_KEY: "test-slack-token-encryption-key",
    SLACK_SOCKET_FORWARD_SECRET: "test-slack-socket-forward-secret",
    FAKE_SLACK_URL: slack.url,
    SLACK_SIGN_IN_BASE_URL: slackOidc.url,
    DISCORD_API_BASE_URL: `${discord.url}/api/v10`,
    DISCORD_PUBLIC_KEY,
    DISCORD_APPLICATION_ID,
    DISCORD_BOT_TOKEN,
    DISCORD_GATEWAY_SECRET: "test-discord-gateway-secret",
    DISCORD_TEST_SIGNING_KEY,
    FAKE_DISCORD_URL: discord.url,
    DISCORD_CLIENT_SECRET: FAKE_DISCORD_CLIENT_SECRET,
    DISCORD_SIGN_IN_BASE_URL: discordOAuth.url,
    WEBHOOK_SECRET,
    WEBHOOK_TENANT_SECRETS_KEY: "test-webhook-tenant-secrets-key",
    FAKE_CALLBACK_URL: callback.url,
    TELEGRAM_API_BASE_URL: telegram.url,
    TELEGRAM_BOTS: JSON.stringify(TELEGRAM_BOTS),
    TELEGRAM_WEBHOOK_SECRET,
    FAKE_TELEGRAM_URL: telegram.url,
    ...gchat.bindings,
    TEAMS_APP_ID,
    TEAMS_APP_PASSWORD,
    TEAMS_OPENID_METADATA_URL: `${teams.url}/v1/.well-known/openidconfiguration`,
    TEAMS_TOKEN_URL: `${teams.url}/botframework.com/oauth2/v2.0/token`,
    FAKE_TEAMS_URL: teams.url,
  };
  return { fakes, bindings, close: () => Promise.all(Object.values(fakes).map((f) => f.close())) };
}

/**
 * The variables a crash harness gives `wrangler dev` to reach the fake
 * provider: a queue message lost with a killed process is sent again when its
 * lease runs out, short here so a run is quick.
 */
export function crashVars(bindings) {
  return {
    ADMIN_TOKEN: bindings.ADMIN_TOKEN,
    MODEL_PROVIDERS: bindings.MODEL_PROVIDERS,
    HARNESS_MODEL: bindings.HARNESS_MODEL,
    FAKE_PROVIDER_KEY: bindings.FAKE_PROVIDER_KEY,
    MODEL_RETRY_BASE_SECONDS: "0",
    EFFECT_LEASE_SECONDS: "5",
  };
}

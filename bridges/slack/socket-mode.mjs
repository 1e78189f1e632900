// `npm run slack:socket`: the Slack Socket Mode connector, for local
// development without a public URL. A Bolt app holds the socket (app token,
// connections:write) and forwards every event, slash command and button click
// to the Worker's POST /slack/forward, signed with SLACK_SOCKET_FORWARD_SECRET
// (bridges/shared/signed-request.ts's scheme). The Worker runs the same
// ingress as over HTTP and answers through the Web API; this process never posts.
//
// Settings (environment, else .dev.vars; `--help`): SLACK_APP_TOKEN (xapp-…),
// SLACK_SOCKET_FORWARD_SECRET, ANTIPROTON_URL (default http://127.0.0.1:8787).
import { pathToFileURL } from "node:url";
import bolt from "@slack/bolt";
import { z } from "zod";
import { ConnectorError, networkReason, postSigned, readSettings, runConnector, WORKER_URL } from "../shared/connector.mjs";

const { App, LogLevel, SocketModeReceiver } = bolt;

/** Events were already acked by Bolt, so a failed forward is retried; a command has 3 s, so it is tried once. */
const EVENT_ATTEMPTS = 5;
const UNREACHABLE = { response_type: "ephemeral", text: "The agent could not be reached. Is the Worker running?" };
const COMMAND = "npm run slack:socket";

/**
 * Opening the socket (apps.connections.open) is retried 5 times, 0.5 s doubling
 * (about 15 s), then the connector gives up and says so: Bolt's default, 100
 * retries, warns for hours when the network is down.
 */
const OPEN_RETRIES = { retries: 5, factor: 2, minTimeout: 500 };

const APP_TOKEN_WHERE = "Basic Information → App-Level Tokens, scope connections:write";
const BOT_TOKEN_WHERE = "OAuth & Permissions → Bot User OAuth Token";

const TOKENS = {
  app: { prefix: "xapp-", name: "SLACK_APP_TOKEN", what: "an app-level token", needs: `Socket Mode needs the app-level token, xapp-… (${APP_TOKEN_WHERE})` },
  bot: { prefix: "xoxb-", name: "SLACK_BOT_TOKEN", what: "a bot token", needs: `The Worker posts with the bot token, xoxb-… (${BOT_TOKEN_WHERE})` },
};

/** A Slack token of one kind; the other kind in its place is refused with a sentence saying which is which. */
function slackToken(kind) {
  const [it, other] = kind === "app" ? [TOKENS.app, TOKENS.bot] : [TOKENS.bot, TOKENS.app];
  return z.string().refine((token) => token.startsWith(it.prefix), {
    error: (issue) =>
      String(issue.input).startsWith(other.prefix)
        ? `holds ${other.what} (${other.prefix}…). ${it.needs}; ${other.what} goes in ${other.name}`
        : `does not start with ${it.prefix}. ${it.needs}`,
  });
}

/** What `npm run slack:socket` reads. SLACK_BOT_TOKEN is the Worker's, checked here only because .dev.vars holds both. */
export const SETTINGS = {
  command: COMMAND,
  summary: "holds a Slack Socket Mode connection and forwards what Slack sends to the Worker's POST /slack/forward.",
  doc: "docs/slack.md (Setup with Socket Mode)",
  settings: {
    SLACK_APP_TOKEN: { help: `the app-level token, xapp-… (${APP_TOKEN_WHERE})`, schema: slackToken("app") },
    SLACK_SOCKET_FORWARD_SECRET: { help: "signs each forward; the Worker has the same value", schema: z.string() },
    ANTIPROTON_URL: WORKER_URL,
    SLACK_BOT_TOKEN: { help: "not used here (the Worker posts with it); if set, it must be the xoxb- bot token", schema: slackToken("bot").optional() },
  },
};

/** The Socket Mode envelope type a Bolt body came in: the Worker's ingress for it. */
export function kindOf(body) {
  if (body.type === "event_callback" || body.type === "app_rate_limited") return "events_api";
  if (typeof body.command === "string") return "slash_commands";
  return "interactive";
}

/** POSTs one payload to the Worker; returns its JSON answer, or throws once the attempts are spent. */
export async function forward(body, target, attempts = 1) {
  const res = await postSigned(target, "/slack/forward", JSON.stringify({ kind: kindOf(body), body }), attempts);
  const answer = await res.json().catch(() => ({}));
  if (!res.ok) throw new Error(`the Worker answered ${res.status}: ${answer.error ?? "no reason given"}`);
  return answer;
}

/**
 * The Bolt app. `receiver` replaces the socket (tests pass a double); otherwise
 * Bolt's SocketModeReceiver connects with `appToken`.
 */
export function createConnector({ url, secret, appToken, receiver, logLevel = LogLevel.INFO }) {
  const app = new App({
    receiver:
      receiver ??
      new SocketModeReceiver({
        appToken,
        // Its own warnings repeat each failed attempt; the one sentence after the last is ours.
        logLevel: LogLevel.ERROR,
        installerOptions: { clientOptions: { retryConfig: OPEN_RETRIES } },
      }),
    // The connector never calls the Web API: the Worker holds the bot tokens.
    authorize: async () => ({}),
    // The Worker decides what to ignore (bots, itself included, edits), in one place for HTTP and socket.
    ignoreSelf: false,
    logLevel,
  });
  app.use(async ({ body, ack }) => {
    const kind = kindOf(body);
    try {
      const answer = await forward(body, { url, secret }, kind === "events_api" ? EVENT_ATTEMPTS : 1);
      if (ack) await ack(kind === "slash_commands" ? answer : undefined);
    } catch (err) {
      app.logger.error(`forwarding a ${kind} payload failed: ${err instanceof Error ? err.message : String(err)}`);
      if (ack) await ack(kind === "slash_commands" ? UNREACHABLE : undefined);
    }
  });
  return app;
}

async function main() {
  const settings = readSettings(SETTINGS);
  const url = settings.ANTIPROTON_URL;
  const app = createConnector({ url, secret: settings.SLACK_SOCKET_FORWARD_SECRET, appToken: settings.SLACK_APP_TOKEN });
  try {
    await app.start();
  } catch (err) {
    const refused = err?.data?.error; // Slack's own answer, e.g. invalid_auth
    throw new ConnectorError(
      refused
        ? `Slack refused SLACK_APP_TOKEN (${refused}): generate a new app-level token (${APP_TOKEN_WHERE}).`
        : `Could not open a Socket Mode connection to Slack after ${OPEN_RETRIES.retries + 1} attempts (${networkReason(err.original ?? err)}). Check the network, then run ${COMMAND} again.`,
    );
  }
  console.log(`Slack Socket Mode connector forwarding to ${url}`);
  for (const signal of ["SIGINT", "SIGTERM"]) process.on(signal, () => app.stop().finally(() => process.exit(0)));
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) await runConnector(COMMAND, main);

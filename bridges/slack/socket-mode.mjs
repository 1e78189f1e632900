// `npm run slack:socket`: the Slack Socket Mode connector, for local
// development without a public URL. A Bolt app holds the socket (app token,
// connections:write) and forwards every event, slash command and button click
// to the Worker's POST /slack/forward, signed with SLACK_SOCKET_FORWARD_SECRET
// (bridges/shared/signed-request.ts's scheme). The Worker runs the same
// ingress as over HTTP and answers through the Web API; this process never posts.
//
// Environment: SLACK_APP_TOKEN (xapp-…), SLACK_SOCKET_FORWARD_SECRET,
// ANTIPROTON_URL (default http://127.0.0.1:8787).
import { pathToFileURL } from "node:url";
import bolt from "@slack/bolt";
import { postSigned, requiredEnv } from "../shared/connector.mjs";

const { App, LogLevel } = bolt;

/** Events were already acked by Bolt, so a failed forward is retried; a command has 3 s, so it is tried once. */
const EVENT_ATTEMPTS = 5;
const UNREACHABLE = { response_type: "ephemeral", text: "The agent could not be reached. Is the Worker running?" };
const DOC = "docs/slack.md";

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
    ...(receiver ? { receiver } : { socketMode: true, appToken }),
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
  const app = createConnector({
    url: process.env.ANTIPROTON_URL ?? "http://127.0.0.1:8787",
    secret: requiredEnv("SLACK_SOCKET_FORWARD_SECRET", DOC),
    appToken: requiredEnv("SLACK_APP_TOKEN", DOC),
  });
  await app.start();
  console.log(`Slack Socket Mode connector forwarding to ${process.env.ANTIPROTON_URL ?? "http://127.0.0.1:8787"}`);
  for (const signal of ["SIGINT", "SIGTERM"]) process.on(signal, () => app.stop().finally(() => process.exit(0)));
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) await main();

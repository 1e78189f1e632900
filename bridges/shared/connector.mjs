// What the Node connectors (Slack Socket Mode, Discord gateway and command
// registration) share: their settings (environment, else .dev.vars; --help; every
// problem named at once), ending with one sentence instead of a stack trace, and
// signing a forward with bridges/shared/signed-request.ts's scheme and posting it
// with retries.
import { createHmac } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import { resolve } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { z } from "zod";

/** A connector cannot go on; `message` is the whole sentence the person reads. */
export class ConnectorError extends Error {}

/** v1=HMAC-SHA256("timestamp.body") with the shared secret. */
export function signatureHeaders(secret, body, now = Date.now()) {
  const timestamp = String(Math.floor(now / 1000));
  const mac = createHmac("sha256", secret).update(`${timestamp}.${body}`).digest("hex");
  return { "X-Antiproton-Timestamp": timestamp, "X-Antiproton-Signature": `v1=${mac}` };
}

/**
 * POSTs a signed JSON body to the Worker, retrying (with backoff) while it is
 * unreachable or answers 5xx; a 4xx would be refused again and is returned.
 * Throws only when the last attempt could not reach the Worker.
 */
export async function postSigned({ url, secret }, path, body, attempts) {
  for (let attempt = 1; ; attempt++) {
    try {
      const res = await fetch(`${url.replace(/\/+$/, "")}${path}`, {
        method: "POST",
        headers: { "content-type": "application/json", ...signatureHeaders(secret, body) },
        body,
      });
      if (res.status < 500 || attempt >= attempts) return res;
    } catch (err) {
      if (attempt >= attempts) throw err;
    }
    await sleep(500 * 2 ** (attempt - 1));
  }
}

/** The Worker's URL, as every connector reads it. */
export const WORKER_URL = {
  help: "the Worker to forward to (default http://127.0.0.1:8787, where npm start serves it)",
  schema: z.url({ protocol: /^https?$/, error: "must be an http(s) URL, e.g. http://127.0.0.1:8787" }).default("http://127.0.0.1:8787"),
};

/** KEY=VALUE lines as wrangler reads .dev.vars: blank lines and # comments skipped, one pair of quotes removed. */
export function parseDevVars(text) {
  const vars = {};
  for (const line of text.split(/\r?\n/)) {
    const match = /^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.*?)\s*$/.exec(line);
    if (!match) continue;
    const [, name, raw] = match;
    const quoted = /^(["'])(.*)\1$/.exec(raw);
    vars[name] = quoted ? quoted[2] : raw.replace(/\s+#.*$/, "");
  }
  return vars;
}

const isRequired = (schema) => !schema.safeParse(undefined).success;

function helpText({ command, summary, doc, settings }) {
  const width = Math.max(...Object.keys(settings).map((name) => name.length));
  const lines = Object.entries(settings).map(
    ([name, { help, schema }]) => `  ${name.padEnd(width)}  ${isRequired(schema) ? "required" : "optional"}  ${help}`,
  );
  return [
    `${command}: ${summary}`,
    "",
    "Each variable is read from the environment, else from .dev.vars in the current directory",
    "(the project root under npm run; the file npm start uses). The environment wins.",
    "",
    ...lines,
    "",
    `See ${doc}.`,
  ].join("\n");
}

/**
 * A connector's settings, checked with zod. `--help` prints what each is for and
 * exits; otherwise every missing variable and every bad value is named in one
 * ConnectorError. `settings` maps a variable's name to `{ help, schema }`.
 */
export function readSettings(spec, { argv = process.argv.slice(2), env = process.env, cwd = process.cwd() } = {}) {
  if (argv.includes("--help") || argv.includes("-h")) {
    console.log(helpText(spec));
    process.exit(0);
  }
  const unknown = argv.filter((arg) => arg.startsWith("-"));
  if (unknown.length) throw new ConnectorError(`${spec.command} takes no option ${unknown.join(" ")}; run it with --help.`);
  const file = resolve(cwd, ".dev.vars");
  const devVars = existsSync(file) ? parseDevVars(readFileSync(file, "utf8")) : {};
  const raw = Object.fromEntries(Object.keys(spec.settings).map((name) => [name, env[name] || devVars[name] || undefined]));
  const parsed = z.object(Object.fromEntries(Object.entries(spec.settings).map(([name, s]) => [name, s.schema]))).safeParse(raw);
  if (parsed.success) return parsed.data;

  const missing = new Set();
  const wrong = [];
  for (const issue of parsed.error.issues) {
    const name = String(issue.path[0]);
    if (raw[name] === undefined) missing.add(name);
    else wrong.push(`${name} ${issue.message}`);
  }
  const names = [...missing];
  const problems = [];
  if (names.length) {
    const list = names.length > 1 ? `${names.slice(0, -1).join(", ")} and ${names.at(-1)}` : names[0];
    problems.push(`${spec.command} needs ${list}: set ${names.length > 1 ? "them" : "it"} in .dev.vars or the environment.`);
  }
  problems.push(...wrong.map((sentence) => (sentence.endsWith(".") ? sentence : `${sentence}.`)));
  throw new ConnectorError(`${problems.join("\n")}\nSee ${spec.doc}, or run ${spec.command} -- --help.`);
}

/** A network failure as a short phrase ("getaddrinfo ENOTFOUND discord.com"), from fetch's cause when it has one. */
export function networkReason(err) {
  const cause = err instanceof Error && err.cause instanceof Error ? err.cause : err;
  return cause instanceof Error ? cause.message : String(cause);
}

/**
 * Runs a connector's main: a ConnectorError (or any other failure, the Slack and
 * Discord clients' late ones included) ends the process with one sentence and
 * exit code 1, never a stack trace.
 */
export async function runConnector(command, main) {
  const stop = (err) => {
    console.error(err instanceof ConnectorError ? err.message : `${command} stopped: ${networkReason(err)}`);
    process.exit(1);
  };
  process.on("unhandledRejection", stop);
  try {
    await main();
  } catch (err) {
    stop(err);
  }
}

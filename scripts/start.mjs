// `npm start`: wrangler dev on 127.0.0.1:$PORT (8787) with embedded defaults.
// Creates .dev.vars from .dev.vars.example on first run so the Agents API has a
// token. Starts the machine host (the `machine` plugin's local backend) on
// PORT + 2 where a machine works end to end (its --check), and says why where
// it does not. `npm start
// -- --demo` also serves a demo inbox and mounts a gated http tool that posts
// to it, with console:admin as approver of tenant "demo".
import { appendFileSync, copyFileSync, existsSync, readFileSync } from "node:fs";
import { randomBytes } from "node:crypto";
import { createServer } from "node:http";
import { spawn, spawnSync } from "node:child_process";
import { setTimeout as sleep } from "node:timers/promises";
import { parseDevVars } from "../bridges/shared/connector.mjs";
import { localWranglerEnv } from "./wrangler-env.mjs";

if (!existsSync(".dev.vars")) {
  copyFileSync(".dev.vars.example", ".dev.vars");
  console.log("Created .dev.vars from .dev.vars.example (ADMIN_TOKEN=dev-admin-token).");
}
const port = Number(process.env.PORT ?? "8787");
const inspector = process.env.INSPECTOR_PORT ? ["--inspector-port", process.env.INSPECTOR_PORT] : [];
const demo = process.argv.includes("--demo");
const passThrough = process.argv.slice(2).filter((arg) => arg !== "--demo");

/**
 * A loopback receiver for the demo's gated POST: it prints what arrives and
 * answers GET with everything received, so a person (or a test) can see that
 * nothing arrived before the Approve click and one post after it.
 */
function startDemoInbox(inboxPort) {
  const received = [];
  const server = createServer((req, res) => {
    let body = "";
    req.on("data", (chunk) => (body += chunk));
    req.on("end", () => {
      if (req.method === "POST") {
        received.push({ at: new Date().toISOString(), body });
        console.log(`[demo inbox] received a POST: ${body}`);
        res.writeHead(200, { "content-type": "text/plain" }).end(`Delivered to the demo inbox (${received.length} so far).`);
      } else {
        res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ received }));
      }
    });
  });
  server.on("error", (err) => {
    console.error(`The demo inbox could not listen on 127.0.0.1:${inboxPort} (${err.code ?? err.message}); set PORT to move the Worker and the inbox (PORT + 1).`);
    process.exit(1);
  });
  server.listen(inboxPort, "127.0.0.1");
  return server;
}

/** Prints `text` once the Worker answers, so it follows wrangler's banner instead of scrolling away above it. */
async function announceWhenReady(text) {
  for (;;) {
    await sleep(500);
    const ok = await fetch(`http://127.0.0.1:${port}/`).then((res) => res.ok, () => false);
    if (ok) return console.log(`\n${text}\n`);
  }
}

function demoVars(inboxUrl) {
  const mounts = [
    { alias: "clock", plugin: "clock" },
    { alias: "inbox", plugin: "http", config: { allowedHosts: [new URL(inboxUrl).host] }, policy: { tools: { post: "approval" } } },
  ];
  return { MOUNTS: JSON.stringify(mounts), APPROVERS: JSON.stringify({ demo: ["console:admin"] }) };
}

/** A local secret: from the environment or .dev.vars, or made now and written to .dev.vars (`what` says what it is). */
function devSecret(name, what) {
  const known = process.env[name] || parseDevVars(readFileSync(".dev.vars", "utf8"))[name];
  if (known) return known;
  const token = randomBytes(24).toString("hex");
  appendFileSync(".dev.vars", `\n# ${what} (written by npm start).\n${name}=${token}\n`);
  console.log(`Wrote a new ${name} into .dev.vars (${what}).`);
  return token;
}

// Tenants' own secrets are sealed under it (PUT /v1/tenants/{tenant}/secrets/{name}).
devSecret("TENANT_SECRETS_KEY", "the key tenants' secrets are sealed with");

/**
 * Starts the machine host where a machine works end to end, and resolves with the
 * Worker variables that point at it; otherwise says why and resolves with
 * MACHINE_BACKEND=none (the machine plugin then answers that no backend is
 * available). The host ends with this process (its stdin closes).
 */
async function startMachineHost(hostPort) {
  const none = (reason) => {
    console.log(`No machine backend: ${reason} Mounts of the machine plugin answer that none is available (docs/machines.md).`);
    return { MACHINE_BACKEND: "none" };
  };
  // Not only whether bubblewrap starts: a machine is started, used and destroyed over loopback, in a folder beside the host's.
  const check = spawnSync(process.execPath, ["machines/host/host.mjs", "--check"], { encoding: "utf8", env: { ...process.env, MACHINE_HOST_PORT: String(hostPort) } });
  if (check.status !== 0) return none((check.stderr || check.stdout).trim().replace(/^No machine backend: /, ""));
  console.log(`[machines] ${check.stdout.trim()}`);
  const token = devSecret("MACHINE_HOST_TOKEN", "the machine host's secret, shared with the Worker");
  const host = spawn(process.execPath, ["machines/host/host.mjs", "--exit-with-stdin"], {
    env: { ...process.env, MACHINE_HOST_TOKEN: token, MACHINE_HOST_PORT: String(hostPort) },
    stdio: ["pipe", "pipe", "pipe"],
  });
  for (const stream of [host.stdout, host.stderr]) stream.on("data", (chunk) => process.stdout.write(String(chunk).replace(/^(?=.)/gm, "[machines] ")));
  const url = `http://127.0.0.1:${hostPort}`;
  for (;;) {
    if (host.exitCode !== null) return none(`the machine host stopped as it started (exit ${host.exitCode}).`);
    const up = await fetch(`${url}/health`, { headers: { authorization: `Bearer ${token}` } }).then((res) => res.ok, () => false);
    if (up) return { MACHINE_BACKEND: "local", MACHINE_HOST_URL: url };
    await sleep(100);
  }
}

const vars = [];
const machineVars = await startMachineHost(Number(process.env.MACHINE_HOST_PORT ?? port + 2));
for (const [name, value] of Object.entries(machineVars)) vars.push("--var", `${name}:${value}`);
if (demo) {
  const inboxUrl = `http://127.0.0.1:${port + 1}/inbox`;
  startDemoInbox(port + 1);
  for (const [name, value] of Object.entries(demoVars(inboxUrl))) vars.push("--var", `${name}:${value}`);
  announceWhenReady(
    `Demo: the agent may POST to the demo inbox ${inboxUrl} once someone approves (mount "inbox", policy approval),\n` +
      `and console:admin may approve for tenant "demo". Ask agent helper of tenant demo: "Please post hello to ${inboxUrl}",\n` +
      `then approve at http://127.0.0.1:${port}/console (docs/approvals.md: "Approve a call").`,
  );
}

const child = spawn("npx", ["wrangler", "dev", "--ip", "127.0.0.1", "--port", String(port), ...inspector, ...vars, ...passThrough], {
  stdio: "inherit",
  env: {
    ...localWranglerEnv(),
    // Miniflare fetches a real Request.cf object from workers.cloudflare.com on
    // each start; offline that prints a stack trace. Its placeholder serves a
    // local run, and nothing here reads request.cf. Set "true" to fetch it.
    CLOUDFLARE_CF_FETCH_ENABLED: process.env.CLOUDFLARE_CF_FETCH_ENABLED ?? "false",
  },
});
for (const signal of ["SIGINT", "SIGTERM"]) process.on(signal, () => child.kill(signal));
child.on("exit", (code) => process.exit(code ?? 0));

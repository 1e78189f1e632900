// `npm start`: wrangler dev on 127.0.0.1:$PORT (8787) with embedded defaults.
// Creates .dev.vars from .dev.vars.example on first run so the Agents API has a
// token. `npm start -- --demo` also serves a demo inbox and mounts a gated http
// tool that posts to it, with console:admin as approver of tenant "demo".
import { copyFileSync, existsSync } from "node:fs";
import { createServer } from "node:http";
import { spawn } from "node:child_process";
import { setTimeout as sleep } from "node:timers/promises";

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

const vars = [];
if (demo) {
  const inboxUrl = `http://127.0.0.1:${port + 1}/inbox`;
  startDemoInbox(port + 1);
  for (const [name, value] of Object.entries(demoVars(inboxUrl))) vars.push("--var", `${name}:${value}`);
  announceWhenReady(
    `Demo: the agent may POST to the demo inbox ${inboxUrl} once someone approves (mount "inbox", policy approval),\n` +
      `and console:admin may approve for tenant "demo". Ask agent helper of tenant demo: "Please post hello to ${inboxUrl}",\n` +
      `then approve at http://127.0.0.1:${port}/console (README: "Approve a call").`,
  );
}

const child = spawn("npx", ["wrangler", "dev", "--ip", "127.0.0.1", "--port", String(port), ...inspector, ...vars, ...passThrough], {
  stdio: "inherit",
  env: {
    ...process.env,
    WRANGLER_SEND_METRICS: "false",
    // Miniflare fetches a real Request.cf object from workers.cloudflare.com on
    // each start; offline that prints a stack trace. Its placeholder serves a
    // local run, and nothing here reads request.cf. Set "true" to fetch it.
    CLOUDFLARE_CF_FETCH_ENABLED: process.env.CLOUDFLARE_CF_FETCH_ENABLED ?? "false",
  },
});
for (const signal of ["SIGINT", "SIGTERM"]) process.on(signal, () => child.kill(signal));
child.on("exit", (code) => process.exit(code ?? 0));

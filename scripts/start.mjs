// `npm start`: wrangler dev on 127.0.0.1:8787 with embedded defaults. Creates
// .dev.vars from .dev.vars.example on first run so the Agents API has a token.
import { copyFileSync, existsSync } from "node:fs";
import { spawn } from "node:child_process";

if (!existsSync(".dev.vars")) {
  copyFileSync(".dev.vars.example", ".dev.vars");
  console.log("Created .dev.vars from .dev.vars.example (ADMIN_TOKEN=dev-admin-token).");
}
const port = process.env.PORT ?? "8787";
const inspector = process.env.INSPECTOR_PORT ? ["--inspector-port", process.env.INSPECTOR_PORT] : [];
const child = spawn("npx", ["wrangler", "dev", "--ip", "127.0.0.1", "--port", port, ...inspector, ...process.argv.slice(2)], {
  stdio: "inherit",
  env: { ...process.env, WRANGLER_SEND_METRICS: "false" },
});
for (const signal of ["SIGINT", "SIGTERM"]) process.on(signal, () => child.kill(signal));
child.on("exit", (code) => process.exit(code ?? 0));

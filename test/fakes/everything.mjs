// The reference MCP server itself, not a fake: @modelcontextprotocol/server-everything
// from npm (a devDependency), run as a Node child process in its Streamable HTTP
// mode on a loopback port. A control server on loopback kills it (SIGKILL) and
// starts it again on the same port, as a crash or a redeploy does: every
// session it issued is gone.
import { spawn } from "node:child_process";
import { once } from "node:events";
import { createRequire } from "node:module";
import { createServer } from "node:net";
import { dirname, join } from "node:path";
import { listen, sendJson } from "./http.mjs";

const SERVER = join(dirname(createRequire(import.meta.url).resolve("@modelcontextprotocol/server-everything/package.json")), "dist", "index.js");
const LOOPBACK_ONLY = new URL("./everything-loopback.mjs", import.meta.url).href;
/** What it prints (on stderr) once it listens. */
const LISTENING = "MCP Streamable HTTP Server listening on port";
const START_MS = 15_000;

export async function startEverything() {
  const port = await freePort();
  let server = await start(port);
  const control = await listen(async (req, res) => {
    if (req.method === "POST" && req.url === "/_control/restart") {
      await stop(server);
      server = await start(port);
      return sendJson(res, 200, { pid: server.pid });
    }
    return sendJson(res, 404, { error: "not found" });
  });
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    controlUrl: control.url,
    close: async () => {
      await stop(server);
      await control.close();
    },
  };
}

function freePort() {
  return new Promise((resolve, reject) => {
    const probe = createServer().once("error", reject);
    probe.listen(0, "127.0.0.1", () => {
      const { port } = probe.address();
      probe.close(() => resolve(port));
    });
  });
}

/** Starts the server on `port`; resolves once it listens. */
function start(port) {
  // None of this process's environment: the server's get-env tool shows all it has.
  const child = spawn(process.execPath, ["--import", LOOPBACK_ONLY, SERVER, "streamableHttp"], { env: { PORT: String(port) }, stdio: ["pipe", "ignore", "pipe"] });
  // Neither the child nor its pipes keep this process alive (vitest's main process ends when its run does).
  child.unref();
  child.stdin.unref();
  child.stderr.unref();
  return new Promise((resolve, reject) => {
    let said = "";
    const fail = (why) => {
      clearTimeout(timer);
      child.kill("SIGKILL");
      reject(new Error(`server-everything ${why}: ${said}`));
    };
    const timer = setTimeout(() => fail(`did not listen within ${START_MS} ms`), START_MS);
    child.once("exit", (code, signal) => fail(`exited (${code ?? signal}) before it listened`));
    child.stderr.on("data", function starting(chunk) {
      said += chunk;
      if (!said.includes(LISTENING)) return;
      clearTimeout(timer);
      child.removeAllListeners("exit");
      child.stderr.off("data", starting).resume();
      resolve(child);
    });
  });
}

async function stop(child) {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = once(child, "exit");
  child.kill("SIGKILL");
  await exited;
}

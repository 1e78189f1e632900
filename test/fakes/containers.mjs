// Cloudflare's container runtime on loopback, for the Cloudflare machine
// backend's tests: the real Machine object and @cloudflare/containers run in
// workerd, and only the platform's `ctx.container` is played by
// test/fakes/container.ts, which drives this server. Each container is its
// entrypoint run as a process, with what a real container gives it mapped
// onto this host: its own /workspace (a folder bound there by bubblewrap's
// mount namespace, the only isolation it gets), Cloudflare's CA file, its port (MACHINED_PORT,
// 8080 inside) onto a free loopback port. It has the host's network: network
// rules are asserted on the start options and the interceptions the object
// registers, not enforced here (the local backend's tests show a machine
// without network cannot reach loopback).
import { spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { request } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { systemArgs } from "../../machines/host/sandbox.mjs";
import { freePort } from "../node/wrangler-dev.mjs";
import { listen, readBody, sendJson } from "./http.mjs";

/** The CA Cloudflare puts in a container for its HTTPS interception (a stand-in: its text is what the tests look for). */
export const FAKE_CLOUDFLARE_CA = "-----BEGIN CERTIFICATE-----\nfake-cloudflare-containers-ca\n-----END CERTIFICATE-----\n";
const CA_PATH = "/etc/cloudflare/certs/cloudflare-containers-ca.crt";

/** The text a port fetch fails with while nothing listens, as Cloudflare's runtime words it. */
const NOT_LISTENING = "the container is not listening";


export async function startContainers() {
  /** id → { child, port, folder, exited: Promise<number>, exitCode } */
  const containers = new Map();
  /** id → every start's options, and every interception registered */
  const starts = new Map();
  const intercepts = new Map();
  const root = mkdtempSync(join(tmpdir(), "antiproton-fake-containers-"));

  function kill(c) {
    if (c.exitCode !== undefined) return c.exited;
    try {
      process.kill(-c.child.pid, "SIGKILL");
    } catch {
      // gone
    }
    return c.exited;
  }

  async function start(id, options) {
    const old = containers.get(id);
    if (old && old.exitCode === undefined) throw new Error(`container ${id} is already running`);
    starts.set(id, [...(starts.get(id) ?? []), options]);
    const port = await freePort();
    const folder = join(root, `${id}-${starts.get(id).length}`);
    mkdirSync(join(folder, "workspace"), { recursive: true });
    writeFileSync(join(folder, "ca.crt"), FAKE_CLOUDFLARE_CA);
    // The image: this host's system read-only and its node (where the real one has node on PATH).
    const env = { ...options.env, PATH: "/opt/node/bin:/usr/bin:/bin", MACHINED_PORT: String(port) };
    const filesystem = [...systemArgs(), "--ro-bind", process.execPath, "/opt/node/bin/node", "--bind", join(folder, "workspace"), "/workspace", "--ro-bind", join(folder, "ca.crt"), CA_PATH, "--tmpfs", "/tmp", "--chdir", "/workspace", "--die-with-parent"];
    const child = spawn("bwrap", [...filesystem, "--", ...options.entrypoint], { env, detached: true, stdio: ["ignore", "ignore", "ignore"] });
    child.unref();
    const c = { child, port, innerPort: options.env?.MACHINED_PORT, folder, exitCode: undefined };
    c.exited = new Promise((resolve) =>
      child.on("exit", (code, signal) => {
        c.exitCode = code ?? (signal ? 137 : 0);
        rmSync(folder, { recursive: true, force: true });
        resolve(c.exitCode);
      }),
    );
    containers.set(id, c);
  }

  function toPort(c, req, res, path) {
    const upstream = request({ host: "127.0.0.1", port: c.port, method: req.method, path, headers: req.headers }, (answer) => {
      res.writeHead(answer.statusCode ?? 502, answer.headers);
      answer.pipe(res);
    });
    upstream.on("error", (err) => {
      if (res.headersSent) return res.destroy();
      sendJson(res, 599, { error: err.code === "ECONNREFUSED" ? NOT_LISTENING : err.message });
    });
    res.on("close", () => {
      if (!res.writableFinished) upstream.destroy();
    });
    req.pipe(upstream);
  }

  const server = await listen(async (req, res) => {
    const url = new URL(req.url, "http://x");
    const [, first, id, op, port] = url.pathname.split("/");
    if (first !== "containers" || !id) return sendJson(res, 404, { error: "no route" });
    const c = containers.get(id);
    const running = c !== undefined && c.exitCode === undefined;
    if (op === "port") {
      if (!running || port !== c.innerPort) return sendJson(res, 599, { error: NOT_LISTENING });
      return toPort(c, req, res, `/${url.pathname.split("/").slice(5).join("/")}${url.search}`);
    }
    if (req.method === "POST" && op === "start") {
      await start(id, JSON.parse(await readBody(req)));
      return sendJson(res, 200, { ok: true });
    }
    if (req.method === "POST" && op === "wait") {
      if (!c) return sendJson(res, 200, { exitCode: null });
      return sendJson(res, 200, { exitCode: await c.exited });
    }
    if (req.method === "POST" && op === "destroy") {
      if (c) await kill(c);
      return sendJson(res, 200, { ok: true });
    }
    if (req.method === "POST" && op === "signal") {
      const { signo } = JSON.parse(await readBody(req));
      if (running) process.kill(-c.child.pid, signo);
      return sendJson(res, 200, { ok: true });
    }
    if (req.method === "POST" && op === "intercept") {
      intercepts.set(id, [...(intercepts.get(id) ?? []), JSON.parse(await readBody(req))]);
      return sendJson(res, 200, { ok: true });
    }
    // What the tests read: whether it runs (and its process, to show none is left), its starts and interceptions.
    if (req.method === "GET" && op === undefined) return sendJson(res, 200, { running, pid: running ? c.child.pid : null, starts: starts.get(id) ?? [], intercepts: intercepts.get(id) ?? [] });
    return sendJson(res, 404, { error: "no route" });
  });

  return {
    url: server.url,
    async close() {
      await Promise.all([...containers.values()].map(kill));
      rmSync(root, { recursive: true, force: true });
      await server.close();
    },
  };
}

// machined: the daemon inside every machine. It runs commands and reads,
// writes and lists files for whoever can reach it, which is only the machine
// host (locally: a unix socket the host made in the machine's folder and
// handed over, which the machine cannot replace) or the machine's Durable
// Object (on Cloudflare: the container's port). It logs nothing about the requests it serves: a command's
// environment may hold a secret for that one call.
//
// Plain Node built-ins only: the Worker hands this very file to a container
// as `node --input-type=module -e <source>`, and the local host runs it as a
// file. Configured by environment:
//   MACHINED_LISTEN_FD  serve the listening socket the host passed on this fd, or
//   MACHINED_PORT     listen on this TCP port (in a container)
//   MACHINED_WORKSPACE  the machine's working folder (commands start there)
//   MACHINED_PROXY_SOCKET  the host's filtering proxy for a machine that may
//                     reach some hosts: served inside the machine on
//                     127.0.0.1:3128 and named in every command's proxy variables
//   MACHINED_MEMORY_BYTES  each command's data segment limit (prlimit), if set
//   MACHINED_EXTRA_CA  a CA certificate commands must trust besides the system's
//                     (Cloudflare's, for a container whose https is intercepted)
import { spawn } from "node:child_process";
import { createReadStream, existsSync, promises as fs } from "node:fs";
import { createServer } from "node:http";
import { connect, createServer as createTcpServer } from "node:net";
import path from "node:path";

const WORKSPACE = process.env.MACHINED_WORKSPACE || "/workspace";
const PROXY_SOCKET = process.env.MACHINED_PROXY_SOCKET || "";
/** Each command's memory limit, where the image has prlimit (util-linux) to set it. */
const MEMORY_BYTES = existsSync("/usr/bin/prlimit") ? Number(process.env.MACHINED_MEMORY_BYTES || "0") : 0;
const PROXY_PORT = 3128;
/** A written file's body, at most. */
const MAX_WRITE_BYTES = 10 * 1024 * 1024;
const MAX_READ_BYTES = 1024 * 1024;
const MAX_LIST_ENTRIES = 1000;
const MAX_OUTPUT_BYTES = 1024 * 1024;
/** A kept folders' archive, at most (it is held in memory on its way to storage). */
const MAX_ARCHIVE_BYTES = 50 * 1024 * 1024;
/** After a command exits, how long its output may still drain (a background child may hold the pipe open). */
const DRAIN_MS = 200;

class RequestError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

function sendJson(res, status, body) {
  const text = JSON.stringify(body);
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text) });
  res.end(text);
}

async function readBody(req, limit) {
  const chunks = [];
  let size = 0;
  for await (const chunk of req) {
    size += chunk.length;
    if (size > limit) throw new RequestError(413, `the body is over ${limit} bytes`);
    chunks.push(chunk);
  }
  return Buffer.concat(chunks);
}

async function readJson(req) {
  try {
    return JSON.parse((await readBody(req, 1024 * 1024)).toString("utf8"));
  } catch (err) {
    if (err instanceof RequestError) throw err;
    throw new RequestError(400, "the body is not JSON");
  }
}

/** A path as the machine sees it: relative ones start in the workspace. */
function machinePath(raw) {
  if (typeof raw !== "string" || raw === "" || raw.includes("\0")) throw new RequestError(400, "path must be a non-empty string");
  return path.resolve(WORKSPACE, raw);
}

function fsError(err, where) {
  const code = err && err.code;
  if (code === "ENOENT") return new RequestError(404, `${where}: no such file or folder`);
  if (code === "EISDIR") return new RequestError(409, `${where} is a folder`);
  if (code === "ENOTDIR") return new RequestError(409, `${where}: a part of the path is not a folder`);
  if (code === "EACCES" || code === "EPERM" || code === "EROFS") return new RequestError(403, `${where}: not allowed (${code})`);
  if (code === "ENOSPC" || code === "EDQUOT" || code === "EFBIG") return new RequestError(507, `${where}: the machine's disk is full (${code})`);
  return err;
}

/**
 * Keeps the first and the last `limit / 2` bytes of a stream and counts what
 * falls between: a long log's end (a test run's summary) is usually what matters.
 */
class CappedOutput {
  constructor(limit) {
    this.headLimit = Math.ceil(limit / 2);
    this.tailLimit = Math.floor(limit / 2);
    this.head = [];
    this.headSize = 0;
    this.tail = [];
    this.tailSize = 0;
    this.total = 0;
  }

  push(chunk) {
    this.total += chunk.length;
    const room = this.headLimit - this.headSize;
    if (room > 0) {
      const part = chunk.subarray(0, room);
      this.head.push(part);
      this.headSize += part.length;
      chunk = chunk.subarray(part.length);
    }
    if (chunk.length === 0 || this.tailLimit === 0) return;
    this.tail.push(chunk);
    this.tailSize += chunk.length;
    while (this.tailSize - this.tail[0].length >= this.tailLimit) this.tailSize -= this.tail.shift().length;
  }

  result() {
    const head = Buffer.concat(this.head);
    let tail = Buffer.concat(this.tail);
    if (tail.length > this.tailLimit) tail = tail.subarray(tail.length - this.tailLimit);
    const omitted = this.total - head.length - tail.length;
    return { head: head.toString("utf8"), tail: tail.toString("utf8"), omitted };
  }
}

const EXTRA_CA = process.env.MACHINED_EXTRA_CA || "";
const SYSTEM_CAS = "/etc/ssl/certs/ca-certificates.crt";
let caEnv;

/** The variables that make common clients trust the extra CA too: a bundle of it and the system's, made once it exists. */
async function trustEnv() {
  if (caEnv || !EXTRA_CA || !existsSync(EXTRA_CA)) return caEnv ?? {};
  const bundle = path.join(process.env.TMPDIR || "/tmp", "machined-ca-bundle.crt");
  const system = existsSync(SYSTEM_CAS) ? await fs.readFile(SYSTEM_CAS, "utf8") : "";
  await fs.writeFile(bundle, `${system}\n${await fs.readFile(EXTRA_CA, "utf8")}`);
  caEnv = { SSL_CERT_FILE: bundle, CURL_CA_BUNDLE: bundle, REQUESTS_CA_BUNDLE: bundle, GIT_SSL_CAINFO: bundle, NODE_EXTRA_CA_CERTS: EXTRA_CA };
  return caEnv;
}

function commandEnv(extra, trust) {
  const env = {
    PATH: "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    HOME: WORKSPACE,
    LANG: "C.UTF-8",
    TMPDIR: "/tmp",
  };
  if (PROXY_SOCKET) {
    const proxy = `http://127.0.0.1:${PROXY_PORT}`;
    Object.assign(env, { HTTP_PROXY: proxy, HTTPS_PROXY: proxy, http_proxy: proxy, https_proxy: proxy, ALL_PROXY: proxy, NO_PROXY: "", no_proxy: "" });
  }
  return { ...env, ...trust, ...extra };
}

function parseExec(body) {
  const { command, cwd, env, timeoutMs, maxOutputBytes } = body ?? {};
  if (typeof command !== "string" || command === "") throw new RequestError(400, "command must be a non-empty string");
  if (env !== undefined && (typeof env !== "object" || env === null || Object.values(env).some((v) => typeof v !== "string"))) throw new RequestError(400, "env must map names to strings");
  if (!Number.isInteger(timeoutMs) || timeoutMs < 1 || timeoutMs > 3_600_000) throw new RequestError(400, "timeoutMs must be an integer from 1 to 3600000");
  if (!Number.isInteger(maxOutputBytes) || maxOutputBytes < 2 || maxOutputBytes > MAX_OUTPUT_BYTES) throw new RequestError(400, `maxOutputBytes must be an integer from 2 to ${MAX_OUTPUT_BYTES}`);
  return { command, cwd: cwd === undefined ? WORKSPACE : machinePath(cwd), env: env ?? {}, timeoutMs, maxOutputBytes };
}

/** Runs `sh -c command` in its own process group; the whole group is killed at the timeout or when the caller goes away. */
async function exec(req, res) {
  const run = parseExec(await readJson(req));
  const stat = await fs.stat(run.cwd).catch((err) => {
    throw fsError(err, run.cwd);
  });
  if (!stat.isDirectory()) throw new RequestError(409, `${run.cwd} is not a folder`);
  const argv = MEMORY_BYTES > 0 ? ["/usr/bin/prlimit", `--data=${MEMORY_BYTES}`, "--", "/bin/sh", "-c", run.command] : ["/bin/sh", "-c", run.command];
  const started = Date.now();
  const child = spawn(argv[0], argv.slice(1), { cwd: run.cwd, env: commandEnv(run.env, await trustEnv()), detached: true, stdio: ["ignore", "pipe", "pipe"] });
  const stdout = new CappedOutput(run.maxOutputBytes);
  const stderr = new CappedOutput(run.maxOutputBytes);
  child.stdout.on("data", (c) => stdout.push(c));
  child.stderr.on("data", (c) => stderr.push(c));
  let timedOut = false;
  const killGroup = () => {
    try {
      process.kill(-child.pid, "SIGKILL");
    } catch {
      // already gone
    }
  };
  const timer = setTimeout(() => {
    timedOut = true;
    killGroup();
  }, run.timeoutMs);
  // The caller gave up (its courier died): nobody will read the answer, so the command is not left running.
  res.on("close", () => {
    if (!res.writableFinished) killGroup();
  });
  const outcome = await new Promise((resolve) => {
    child.on("error", (err) => resolve({ error: err.message }));
    child.on("exit", (code, signal) => resolve({ code, signal }));
  });
  clearTimeout(timer);
  if (outcome.error) throw new RequestError(500, `could not start the command: ${outcome.error}`);
  await Promise.race([
    Promise.all([new Promise((r) => child.stdout.on("close", r)), new Promise((r) => child.stderr.on("close", r))]),
    new Promise((r) => setTimeout(r, DRAIN_MS)),
  ]);
  child.stdout.destroy();
  child.stderr.destroy();
  sendJson(res, 200, {
    exitCode: outcome.code ?? null,
    signal: outcome.signal ?? null,
    timedOut,
    durationMs: Date.now() - started,
    stdout: stdout.result(),
    stderr: stderr.result(),
  });
}

async function readFile(url, res) {
  const file = machinePath(url.searchParams.get("path"));
  const offset = Number(url.searchParams.get("offset") ?? "0");
  const length = Number(url.searchParams.get("length") ?? String(MAX_READ_BYTES));
  if (!Number.isInteger(offset) || offset < 0) throw new RequestError(400, "offset must be a whole number");
  if (!Number.isInteger(length) || length < 1 || length > MAX_READ_BYTES) throw new RequestError(400, `length must be an integer from 1 to ${MAX_READ_BYTES}`);
  const stat = await fs.stat(file).catch((err) => {
    throw fsError(err, file);
  });
  if (stat.isDirectory()) throw new RequestError(409, `${file} is a folder`);
  const end = Math.min(stat.size, offset + length);
  res.writeHead(200, { "content-type": "application/octet-stream", "x-file-size": String(stat.size), "content-length": String(Math.max(0, end - offset)) });
  if (end <= offset) return res.end();
  createReadStream(file, { start: offset, end: end - 1 }).on("error", () => res.destroy()).pipe(res);
}

async function writeFile(req, url, res) {
  const file = machinePath(url.searchParams.get("path"));
  const append = url.searchParams.get("append") === "1";
  const body = await readBody(req, MAX_WRITE_BYTES);
  try {
    await fs.mkdir(path.dirname(file), { recursive: true });
    await (append ? fs.appendFile(file, body) : fs.writeFile(file, body));
  } catch (err) {
    throw fsError(err, file);
  }
  const { size } = await fs.stat(file);
  sendJson(res, 200, { path: file, size });
}

async function list(url, res) {
  const folder = machinePath(url.searchParams.get("path") ?? ".");
  let names;
  try {
    names = (await fs.readdir(folder)).sort();
  } catch (err) {
    throw fsError(err, folder);
  }
  const entries = [];
  for (const name of names.slice(0, MAX_LIST_ENTRIES)) {
    const stat = await fs.lstat(path.join(folder, name)).catch(() => undefined);
    if (!stat) continue; // removed meanwhile
    const type = stat.isDirectory() ? "folder" : stat.isFile() ? "file" : stat.isSymbolicLink() ? "link" : "other";
    entries.push({ name, type, size: stat.size, modifiedAt: stat.mtime.toISOString() });
  }
  sendJson(res, 200, { path: folder, entries, more: Math.max(0, names.length - MAX_LIST_ENTRIES) });
}

/** Runs tar in the workspace; resolves with its stdout, or rejects with its stderr. */
function tar(args, input, limit) {
  return new Promise((resolve, reject) => {
    const child = spawn("tar", args, { cwd: WORKSPACE, stdio: ["pipe", "pipe", "pipe"] });
    const out = [];
    let size = 0;
    let err = "";
    child.stdout.on("data", (chunk) => {
      size += chunk.length;
      if (size > limit) return child.kill("SIGKILL");
      out.push(chunk);
    });
    child.stderr.on("data", (chunk) => (err = (err + chunk).slice(-2000)));
    child.on("error", (e) => reject(new RequestError(500, `tar could not run: ${e.message}`)));
    child.on("close", (code) => {
      if (size > limit) return reject(new RequestError(413, `the archive is over ${limit} bytes`));
      if (code !== 0) return reject(new RequestError(500, `tar failed: ${err.trim() || `exit ${code}`}`));
      resolve(Buffer.concat(out));
    });
    child.stdin.on("error", () => undefined);
    child.stdin.end(input);
  });
}

/** The workspace folders named that exist, as one gzipped tar (204 when none exists). */
async function archive(req, res) {
  const { paths } = (await readJson(req)) ?? {};
  if (!Array.isArray(paths) || paths.some((p) => typeof p !== "string" || p === "" || p.startsWith("/") || p.split("/").includes(".."))) {
    throw new RequestError(400, "paths must be folders inside the workspace (relative, no ..)");
  }
  const present = [];
  for (const p of paths) if (await fs.stat(path.join(WORKSPACE, p)).catch(() => undefined)) present.push(p);
  if (present.length === 0) return res.writeHead(204).end();
  const bytes = await tar(["-czf", "-", "--", ...present], "", MAX_ARCHIVE_BYTES);
  res.writeHead(200, { "content-type": "application/gzip", "content-length": bytes.length });
  res.end(bytes);
}

async function restore(req, res) {
  const body = await readBody(req, MAX_ARCHIVE_BYTES);
  await tar(["-xzf", "-"], body, MAX_OUTPUT_BYTES);
  sendJson(res, 200, { restored: body.length });
}

async function route(req, res) {
  const url = new URL(req.url ?? "/", "http://machine");
  const key = `${req.method} ${url.pathname}`;
  if (key === "GET /health") return sendJson(res, 200, { ok: true, workspace: WORKSPACE, network: PROXY_SOCKET ? "allowed hosts" : "none", memoryLimitPerCommand: MEMORY_BYTES || null });
  if (key === "POST /exec") return exec(req, res);
  if (key === "GET /file") return readFile(url, res);
  if (key === "PUT /file") return writeFile(req, url, res);
  if (key === "GET /list") return list(url, res);
  if (key === "POST /archive") return archive(req, res);
  if (key === "POST /restore") return restore(req, res);
  throw new RequestError(404, `no route ${key}`);
}

/** The machine's only way out: 127.0.0.1:3128 inside, piped to the host's proxy, which admits the mount's allowed hosts only. */
function serveProxy() {
  createTcpServer((inside) => {
    const outside = connect(PROXY_SOCKET);
    inside.pipe(outside).pipe(inside);
    const close = () => (inside.destroy(), outside.destroy());
    inside.on("error", close);
    outside.on("error", close);
  }).listen(PROXY_PORT, "127.0.0.1");
}

const server = createServer((req, res) => {
  route(req, res).catch((err) => {
    if (res.headersSent) return res.destroy();
    const status = err instanceof RequestError ? err.status : 500;
    sendJson(res, status, { error: err instanceof Error ? err.message : String(err) });
  });
});
// A long command holds its request open: no idle cut-off (the caller's own timeout governs).
server.requestTimeout = 0;
server.headersTimeout = 30_000;
if (PROXY_SOCKET) serveProxy();
const listenFd = process.env.MACHINED_LISTEN_FD;
if (listenFd) server.listen({ fd: Number(listenFd) });
else server.listen(Number(process.env.MACHINED_PORT || "8080"), "0.0.0.0");

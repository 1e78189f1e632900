// The machined protocol (machines/machined.mjs) as a client, over whatever
// reaches one machine's machined: the local host's forwarding routes, or the
// container's port through its Durable Object.
import { MachineError, type ExecRequest, type ExecResult, type FileRead, type Listing, type MachineBackend, type MachineLabels, type MachineSpec, type MachineStatus } from "./backend.ts";

/** Sends a request to one machine's machined at `path` (e.g. "/exec"). */
export type MachinedFetch = (path: string, init: RequestInit) => Promise<Response>;

/** A non-2xx answer as the error it stands for. */
export async function answerError(res: Response, what: string): Promise<MachineError> {
  const text = await res.text();
  let message = text;
  try {
    message = (JSON.parse(text) as { error?: string }).error ?? text;
  } catch {
    // not JSON: the text itself
  }
  const kind = res.status === 404 ? "missing" : res.status >= 400 && res.status < 500 && res.status !== 408 && res.status !== 429 ? "refused" : res.status === 503 ? "unavailable" : "failed";
  return new MachineError(kind, `${what}: ${message || `HTTP ${res.status}`}`);
}

async function json<T>(res: Response, what: string): Promise<T> {
  if (!res.ok) throw await answerError(res, what);
  return (await res.json()) as T;
}

function machinedClient(send: MachinedFetch) {
  return {
    async exec(request: ExecRequest): Promise<ExecResult> {
      return json(await send("/exec", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(request) }), "running the command");
    },
    async readFile(path: string, offset: number, length: number): Promise<FileRead> {
      const res = await send(`/file?${new URLSearchParams({ path, offset: String(offset), length: String(length) })}`, { method: "GET" });
      if (!res.ok) throw await answerError(res, `reading ${path}`);
      return { size: Number(res.headers.get("x-file-size") ?? "0"), bytes: new Uint8Array(await res.arrayBuffer()) };
    },
    async writeFile(path: string, content: Uint8Array, append: boolean): Promise<{ path: string; size: number }> {
      const query = new URLSearchParams({ path, ...(append ? { append: "1" } : {}) });
      return json(await send(`/file?${query}`, { method: "PUT", headers: { "content-type": "application/octet-stream" }, body: content }), `writing ${path}`);
    },
    async list(path: string): Promise<Listing> {
      return json(await send(`/list?${new URLSearchParams({ path })}`, { method: "GET" }), `listing ${path}`);
    },
    async archive(folders: string[]): Promise<Uint8Array | undefined> {
      const res = await send("/archive", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ paths: folders }) });
      if (!res.ok) throw await answerError(res, `archiving ${folders.join(", ")}`);
      return res.status === 204 ? undefined : new Uint8Array(await res.arrayBuffer());
    },
    async restore(archive: Uint8Array): Promise<void> {
      await json(await send("/restore", { method: "POST", headers: { "content-type": "application/gzip" }, body: archive }), "restoring the kept folders");
    },
  };
}

/** A backend whose machines run machined: the file and command calls are machined's, reached through `machined(id)`. */
export abstract class MachinedBackend implements MachineBackend {
  abstract readonly name: string;
  abstract ensure(id: string, spec: MachineSpec, labels: MachineLabels): Promise<{ created: boolean; machine: MachineStatus }>;
  abstract status(id: string): Promise<MachineStatus | undefined>;
  abstract destroy(id: string): Promise<{ destroyed: boolean }>;
  /** Sends a request to the machined of machine `id`. */
  protected abstract send(id: string): MachinedFetch;

  private machined(id: string) {
    return machinedClient(this.send(id));
  }

  exec: MachineBackend["exec"] = (id, request) => this.machined(id).exec(request);
  readFile: MachineBackend["readFile"] = (id, path, offset, length) => this.machined(id).readFile(path, offset, length);
  writeFile: MachineBackend["writeFile"] = (id, path, content, append) => this.machined(id).writeFile(path, content, append);
  list: MachineBackend["list"] = (id, path) => this.machined(id).list(path);
  archive: MachineBackend["archive"] = (id, folders) => this.machined(id).archive(folders);
  restore: MachineBackend["restore"] = (id, archive) => this.machined(id).restore(archive);
}

// What a machine backend is: the small interface both backends implement
// (the local host's bubblewrap sandboxes, Cloudflare Containers), so the
// `machine` plugin and the lease that will hold machines never know which one
// runs them.

/** What a machine is made with; a machine asked for again with another spec is a new machine. */
export interface MachineSpec {
  /** Which image: "default" (the local host's own /usr, or the container image in wrangler.jsonc). */
  profile: string;
  /** Cores (a fraction is a share of one). */
  cpu: number;
  memoryMiB: number;
  diskMiB: number;
  /** Processes at once. */
  processes: number;
  /** Hosts the machine may reach (host, host:port, *.example.com); empty: no network at all. */
  allowedHosts: string[];
}

/** Whose machine it is, for status and for finding it again; never a secret. */
export interface MachineLabels {
  tenant: string;
  agent: string;
  alias: string;
  conversation: string;
}

export interface MachineStatus {
  id: string;
  labels: Partial<MachineLabels>;
  spec: MachineSpec;
  createdAt: string;
  lastUsedAt: string;
  /** A call (a command, a file) is being served now. */
  busy: boolean;
}

export interface ExecRequest {
  /** Run with `/bin/sh -c`. */
  command: string;
  /** Where it starts; relative to the workspace. Default: the workspace. */
  cwd?: string;
  env: Record<string, string>;
  timeoutMs: number;
  /** Kept per stream: the first and the last half of it. */
  maxOutputBytes: number;
}

/** One stream of a command's output: its start and end, and how many bytes between them were dropped. */
export interface CapturedOutput {
  head: string;
  tail: string;
  omitted: number;
}

export interface ExecResult {
  exitCode: number | null;
  signal: string | null;
  timedOut: boolean;
  durationMs: number;
  stdout: CapturedOutput;
  stderr: CapturedOutput;
}

export interface FileRead {
  /** The file's whole size; `bytes` is the part asked for. */
  size: number;
  bytes: Uint8Array;
}

export interface FileEntry {
  name: string;
  type: "file" | "folder" | "link" | "other";
  size: number;
  modifiedAt: string;
}

export interface Listing {
  path: string;
  entries: FileEntry[];
  /** Entries past the first 1,000, not listed. */
  more: number;
}

export interface MachineBackend {
  /** Says which backend this is, for the model and `status` ("bubblewrap on the local machine host", "Cloudflare Containers"). */
  readonly name: string;
  /** Starts the machine under `id`, or finds it running with the same spec (a different spec: the old one is destroyed first). */
  ensure(id: string, spec: MachineSpec, labels: MachineLabels): Promise<{ created: boolean; machine: MachineStatus }>;
  /** The machine under `id`, or undefined when none runs. */
  status(id: string): Promise<MachineStatus | undefined>;
  exec(id: string, request: ExecRequest): Promise<ExecResult>;
  readFile(id: string, path: string, offset: number, length: number): Promise<FileRead>;
  writeFile(id: string, path: string, content: Uint8Array, append: boolean): Promise<{ path: string; size: number }>;
  list(id: string, path: string): Promise<Listing>;
  /** The named workspace folders that exist, as one gzipped tar; undefined when none exists. */
  archive(id: string, folders: string[]): Promise<Uint8Array | undefined>;
  /** Unpacks an archive made by `archive` into the workspace. */
  restore(id: string, archive: Uint8Array): Promise<void>;
  /** Kills its processes and removes its files; a machine already gone is answered `{ destroyed: false }`. */
  destroy(id: string): Promise<{ destroyed: boolean }>;
}

/**
 * A backend's answer that is not a result: `unavailable` (no backend, or it
 * cannot be reached), `missing` (no such machine, or no such file), `refused`
 * (the request itself is wrong: a bad path, a spec the backend cannot meet),
 * `failed` (the backend tried and could not).
 */
export class MachineError extends Error {
  override name = "MachineError";
  constructor(
    readonly kind: "unavailable" | "missing" | "refused" | "failed",
    message: string,
  ) {
    super(message);
  }
}

// The machine plugin: a real Linux machine as a mount. The model runs shell
// commands and reads, writes and lists files in a machine of its own (one per
// conversation and mount), started on first use by the deployment's machine
// backend (machines/: Cloudflare Containers, or bubblewrap on the local
// machine host). Its calls run in a courier, never in the agent's object. The
// mount's secret reaches a command only as an environment variable of that one
// call; the gateway redacts it from whatever comes back.
import { env } from "cloudflare:workers";
import * as z from "zod";
import { MachineError, machineBackend, type CapturedOutput, type ExecResult, type Listing, type MachineBackend, type MachineLabels, type MachineSpec } from "../machines/index.ts";
import type { HeldSpan, Plugin, ToolContext, ToolOutput } from "./contract.ts";

/**
 * An exec must answer within the courier's lease on a tool call (90 s), with
 * room for starting the machine: a longer command would be taken for a
 * courier that died.
 */
export const MAX_EXEC_SECONDS = 60;
const MAX_READ_BYTES = 60_000;
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,63}$/;

const hostPattern = z
  .string()
  .regex(/^(\*\.)?[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)*(:\d{1,5})?$|^\[[0-9A-Fa-f:.]+\](:\d{1,5})?$/, 'a host: "host", "host:port", "*.example.com" or "[::1]:8080"');

/** A folder of the workspace, as the mount names it. */
const keepFolder = z
  .string()
  .regex(/^[A-Za-z0-9._-]+(\/[A-Za-z0-9._-]+)*$/, "a folder inside the workspace: a relative path of letters, digits, '.', '_' and '-'")
  .refine((p) => !p.split("/").some((part) => part === ".." || part === "."), "a folder inside the workspace (no . or ..)");

const configSchema = z
  .object({
    /** Which image the backend starts: "default" is the one each backend has. */
    profile: z.string().min(1).max(64).default("default"),
    /** Cores; a fraction is a share of one. */
    cpu: z.number().positive().max(8).default(1),
    memoryMiB: z.number().int().min(128).max(16_384).default(1024),
    diskMiB: z.number().int().min(64).max(20_480).default(1024),
    /** Processes at once (where the backend has a cgroup to count them). */
    processes: z.number().int().min(16).max(4096).default(256),
    /** Absent: no network at all. Present: these hosts only. */
    network: z.object({ allowedHosts: z.array(hostPattern).min(1).max(50) }).strict().optional(),
    /** Folders of the workspace that survive a release (saved when it is released, restored in the next machine). */
    keep: z.array(keepFolder).max(10).default([]),
    /** The environment variable a command finds the mount's secret in. */
    secretEnv: z.string().regex(ENV_NAME, "an environment variable name").default("SECRET"),
    /** A command's default time limit; a call may ask for less or more, up to MAX_EXEC_SECONDS. */
    timeoutSeconds: z.number().int().min(1).max(MAX_EXEC_SECONDS).default(MAX_EXEC_SECONDS),
    /** What is kept of each of stdout and stderr: its first and its last half. */
    maxOutputBytes: z.number().int().min(1000).max(30_000).default(16_000),
  })
  .strict();
type MachineConfig = z.infer<typeof configSchema>;

/** Session key: machine id → when its lease was postponed, for the machine started at `createdAt` (a second postpone of one machine is refused). */
export const POSTPONED = "lease_postponed";
interface Postponement {
  createdAt: string;
  at: number;
}
/** A postponement is forgotten after this: no lease lasts that long. */
const POSTPONEMENT_KEPT_MS = 24 * 3600_000;

/** One machine per (tenant, agent, mount, conversation): its id, stable across calls and courier restarts. */
export async function machineId(labels: MachineLabels): Promise<string> {
  const key = [labels.tenant, labels.agent, labels.alias, labels.conversation].join("\n");
  const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(key)));
  return `m-${[...digest.slice(0, 20)].map((b) => b.toString(16).padStart(2, "0")).join("")}`;
}

function machineSpec(config: MachineConfig): MachineSpec {
  return { profile: config.profile, cpu: config.cpu, memoryMiB: config.memoryMiB, diskMiB: config.diskMiB, processes: config.processes, allowedHosts: config.network?.allowedHosts ?? [] };
}

export interface Target {
  backend: MachineBackend;
  id: string;
  labels: MachineLabels;
  config: MachineConfig;
}

export async function target(ctx: Pick<ToolContext, "tenant" | "agent" | "alias" | "conversation" | "config">): Promise<Target> {
  const labels = { tenant: ctx.tenant, agent: ctx.agent, alias: ctx.alias, conversation: ctx.conversation };
  // ToolContext carries no env: the deployment's bindings are read from the Worker's own module.
  return { backend: machineBackend(env), id: await machineId(labels), labels, config: ctx.config as MachineConfig };
}

/** A backend's refusal or failure as a result the model can read; anything else is thrown on (the gateway reports it). */
function failure(err: unknown): ToolOutput {
  if (err instanceof MachineError) return { text: err.message.replace(/^no machine backend/, "No machine backend"), isError: true };
  throw err;
}

/** Where a machine's kept folders wait for the next machine of the same conversation and mount. */
function keptKey(t: Target): string {
  return `machine-keep/${encodeURIComponent(t.labels.tenant)}/${t.id}.tar.gz`;
}

/** Puts the kept folders saved from the machine before into a new one; says so, or nothing. */
async function restoreKept(t: Target): Promise<string> {
  if (t.config.keep.length === 0) return "";
  const saved = await env.LARGE_VALUES.get(keptKey(t));
  if (!saved) return "";
  await t.backend.restore(t.id, new Uint8Array(await saved.arrayBuffer()));
  return ` Its kept folders (${t.config.keep.join(", ")}) were restored from the machine before it.`;
}

/**
 * Ends a machine: its kept folders are saved (or their old copy removed when
 * none exists any more), then it is destroyed, and its span (from its start to
 * now) is handed to the ledger. The lease ends machines the same way.
 */
export async function retire(t: Target): Promise<{ destroyed: boolean; saved: boolean; held: HeldSpan[] }> {
  let saved = false;
  const machine = await t.backend.status(t.id);
  if (t.config.keep.length > 0 && machine) {
    const archive = await t.backend.archive(t.id, t.config.keep);
    if (archive) await env.LARGE_VALUES.put(keptKey(t), archive);
    else await env.LARGE_VALUES.delete(keptKey(t));
    saved = archive !== undefined;
  }
  const { destroyed } = await t.backend.destroy(t.id);
  const held = destroyed && machine ? [heldSpan(t, Date.parse(machine.createdAt), Date.now())] : [];
  return { destroyed, saved, held };
}

/** A machine's span as the ledger counts it, by its size. */
function heldSpan(t: Target, startedAt: number, endedAt: number): HeldSpan {
  const { cpu: vcpu, memoryMiB, diskMiB } = t.config;
  return { id: `${t.id}@${startedAt}`, size: `${vcpu} vCPU, ${memoryMiB} MiB, ${diskMiB} MiB disk`, vcpu, memoryMiB, diskMiB, startedAt, endedAt };
}

/** Runs `use` on the conversation's machine as it is (none may run); a backend's refusal is its answer. */
async function withTarget(ctx: ToolContext, use: (t: Target) => Promise<ToolOutput>): Promise<ToolOutput> {
  try {
    return await use(await target(ctx));
  } catch (err) {
    return failure(err);
  }
}

/** Runs `use` on the conversation's machine, started if none runs; `note` tells the model when it is new (and what it was given). */
function withMachine(ctx: ToolContext, use: (t: Target, note: string) => Promise<ToolOutput>): Promise<ToolOutput> {
  return withTarget(ctx, async (t) => {
    const { created } = await t.backend.ensure(t.id, machineSpec(t.config), t.labels);
    return use(t, created ? `(A new machine was started for this call: its workspace /workspace was empty.${await restoreKept(t)})\n` : "");
  });
}

function bytes(n: number): string {
  return `${String(n).replace(/\B(?=(\d{3})+$)/g, ",")} byte${n === 1 ? "" : "s"}`;
}

function stream(name: string, out: CapturedOutput): string {
  if (out.head === "" && out.tail === "" && out.omitted === 0) return `${name}: (empty)`;
  const middle = out.omitted > 0 ? `\n[… ${bytes(out.omitted)} of ${name} omitted: only its first and last part are shown …]\n` : "";
  return `${name}:\n${out.head}${middle}${out.tail}`;
}

function execText(result: ExecResult, timeoutSeconds: number): string {
  const seconds = (result.durationMs / 1000).toFixed(1);
  const status = result.timedOut
    ? `timed out after ${timeoutSeconds} s: the command and everything it started were killed`
    : result.exitCode !== null
      ? `exit code ${result.exitCode} (${seconds} s)`
      : `killed by ${result.signal} (${seconds} s)`;
  return `${status}\n${stream("stdout", result.stdout)}\n${stream("stderr", result.stderr)}`;
}

function listingText(listing: Listing): string {
  if (listing.entries.length === 0) return `${listing.path} is empty.`;
  const lines = listing.entries.map((e) => (e.type === "folder" ? `${e.name}/` : e.type === "file" ? `${e.name}  ${bytes(e.size)}` : `${e.name}  (${e.type})`));
  const more = listing.more > 0 ? `\n[${listing.more} more entries not listed]` : "";
  return `${listing.path}:\n${lines.join("\n")}${more}`;
}

const pathArg = z.string().min(1).max(4096);

export const machinePlugin: Plugin = {
  name: "machine",
  description: "A Linux machine per conversation: shell commands and files.",
  config: configSchema,
  // A command can do anything the machine can: a person signs it unless the mount's per-tool entry says otherwise.
  defaultPolicy: { exec: "approval" },
  // The runtime's lease (runtime/tools/leases.ts) ends the machine when its turn settles or it sits idle; release ends it at once.
  lease: {
    retire: async (ctx) => (await retire(await target(ctx))).held,
    ends: ["release"],
    postpone: "postpone",
  },
  tools: [
    {
      name: "exec",
      description: `Runs a shell command (/bin/sh -c) in this conversation's machine, a Linux sandbox started on first use, in /workspace unless cwd says otherwise. Answers the exit code, stdout and stderr (long output keeps its first and last part). At most ${MAX_EXEC_SECONDS} s; what it starts in the background ends with it or at the timeout.`,
      parameters: z.object({
        command: z.string().min(1).max(100_000).describe('A shell command line, e.g. "ls -la && npm test"'),
        cwd: pathArg.optional().describe("Working folder, relative to /workspace (default: /workspace)"),
        timeoutSeconds: z.number().int().min(1).max(MAX_EXEC_SECONDS).optional().describe("Kill the command after this many seconds (default: the mount's)"),
        env: z
          .record(z.string().regex(ENV_NAME, "an environment variable name"), z.string().max(32_000))
          .refine((e) => Object.keys(e).length <= 50, "at most 50 variables")
          .optional()
          .describe("Environment variables for this command"),
      }),
      sideEffects: "write",
      idempotency: "never",
      call: (args: { command: string; cwd?: string; timeoutSeconds?: number; env?: Record<string, string> }, ctx) =>
        withMachine(ctx, async (t, note) => {
          if (args.env && t.config.secretEnv in args.env) return { text: `${t.config.secretEnv} holds the mount's secret: a command cannot set it.`, isError: true };
          const timeoutSeconds = args.timeoutSeconds ?? t.config.timeoutSeconds;
          // The secret is this call's only: in this command's environment, never in the machine's files.
          const secret: Record<string, string> = ctx.secret ? { [t.config.secretEnv]: ctx.secret } : {};
          const result = await t.backend.exec(t.id, { command: args.command, cwd: args.cwd, env: { ...args.env, ...secret }, timeoutMs: timeoutSeconds * 1000, maxOutputBytes: t.config.maxOutputBytes });
          return { text: `${note}${execText(result, timeoutSeconds)}`, isError: result.timedOut || result.exitCode !== 0 };
        }),
    },
    {
      name: "read_file",
      description: `Reads a text file of the machine (relative paths are in /workspace), up to ${bytes(MAX_READ_BYTES)} from offset.`,
      parameters: z.object({
        path: pathArg.describe("The file, e.g. \"out/report.txt\""),
        offset: z.number().int().min(0).optional().describe("First byte to read (default 0)"),
      }),
      sideEffects: "read",
      idempotency: "idempotent",
      call: (args: { path: string; offset?: number }, ctx) =>
        withMachine(ctx, async (t, note) => {
          const offset = args.offset ?? 0;
          const read = await t.backend.readFile(t.id, args.path, offset, MAX_READ_BYTES);
          let text: string;
          try {
            text = new TextDecoder("utf-8", { fatal: true, ignoreBOM: false }).decode(read.bytes);
          } catch {
            return { text: `${note}${args.path} is not UTF-8 text (${bytes(read.size)}); read it with exec (e.g. xxd or base64) instead.`, isError: true };
          }
          const end = offset + read.bytes.length;
          const rest = end < read.size ? `\n[bytes ${offset}–${end - 1} of ${read.size} shown; read on with offset ${end}]` : "";
          return { text: `${note}${text}${rest}` };
        }),
    },
    {
      name: "write_file",
      description: "Writes a text file in the machine (relative paths are in /workspace), making its folders; replaces the file unless append is true.",
      parameters: z.object({
        path: pathArg.describe("The file, e.g. \"src/main.py\""),
        content: z.string().max(1_000_000).describe("The text to write"),
        append: z.boolean().optional().describe("Add to the end of the file instead of replacing it"),
      }),
      sideEffects: "write",
      // Writing the same content to the same file again leaves it as once; an append does not.
      idempotency: "idempotent",
      call: (args: { path: string; content: string; append?: boolean }, ctx) =>
        withMachine(ctx, async (t, note) => {
          const written = await t.backend.writeFile(t.id, args.path, new TextEncoder().encode(args.content), args.append === true);
          return { text: `${note}${args.append ? "Appended to" : "Wrote"} ${written.path} (${bytes(written.size)} now).` };
        }),
    },
    {
      name: "list",
      description: "Lists a folder of the machine (default /workspace): names, folders marked with /, file sizes.",
      parameters: z.object({ path: pathArg.optional().describe("The folder (default: /workspace)") }),
      sideEffects: "read",
      idempotency: "idempotent",
      call: (args: { path?: string }, ctx) => withMachine(ctx, async (t, note) => ({ text: `${note}${listingText(await t.backend.list(t.id, args.path ?? "."))}` })),
    },
    {
      name: "release",
      description: "Destroys this conversation's machine now (its processes end, its files are removed, but for the mount's kept folders) when the work is done; a later call starts a new one.",
      parameters: z.object({}),
      sideEffects: "write",
      idempotency: "idempotent",
      call: (_args, ctx) =>
        withTarget(ctx, async (t) => {
          const { destroyed, saved, held } = await retire(t);
          const kept = saved ? ` Its kept folders (${t.config.keep.join(", ")}) were saved for the next machine.` : "";
          return { text: destroyed ? `The machine was released: its processes were ended and its files removed.${kept}` : "There was no machine to release.", metered: held };
        }),
    },
    {
      name: "postpone",
      description: "Asks to keep this conversation's machine once for as long again when it is about to be destroyed for being idle (once per machine).",
      parameters: z.object({}),
      sideEffects: "write",
      idempotency: "idempotent",
      call: (_args, ctx) =>
        withTarget(ctx, async (t) => {
          const machine = await t.backend.status(t.id);
          if (!machine) return { text: "There is no machine to keep: a call that needs one starts it.", isError: true };
          const now = Date.now();
          const all = Object.entries(ctx.session.get<Record<string, Postponement>>(POSTPONED) ?? {}).filter(([, p]) => now - p.at < POSTPONEMENT_KEPT_MS);
          if (all.some(([id, p]) => id === t.id && p.createdAt === machine.createdAt)) return { text: "This machine's idle limit was already postponed once; it cannot be postponed again.", isError: true };
          ctx.session.set(POSTPONED, Object.fromEntries([...all.filter(([id]) => id !== t.id), [t.id, { createdAt: machine.createdAt, at: now }]]));
          return { text: "Postponed: the machine's idle limit is extended once, by its full length." };
        }),
    },
  ],
};

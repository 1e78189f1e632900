// The plugin contract: what a plugin declares and what the gateway hands it.
import type { z } from "zod";

/** "read" changes nothing outside; "write" does. */
export type SideEffects = "read" | "write";
/** "idempotent": performing it twice with the same key is the same as once. */
export type Idempotency = "idempotent" | "never";

/** Per-mount state that lasts across calls and conversations (a cookie, a cursor). */
export interface SessionState {
  get<T = unknown>(key: string): T | undefined;
  set(key: string, value: unknown): void;
}

/**
 * Who can read a conversation: one person in a direct message, or anyone in
 * the workspace's channels (runtime/store/audience.ts decides, per platform).
 */
export type Audience = { kind: "dm"; person: string } | { kind: "channel" };

export interface ToolContext {
  /** Stable for one tool call across replays: use it as an idempotency key. */
  callKey: string;
  /** The mount's alias: two mounts of one plugin are two authorities. */
  alias: string;
  tenant: string;
  agent: string;
  conversation: string;
  audience: Audience;
  /** The mount's own config (never shown to the model). */
  config: Record<string, unknown>;
  /** The mount's `secret_ref`, resolved at call time. Never put it in the output: the gateway redacts it anyway. */
  secret?: string;
  session: SessionState;
  /** Tells the gateway the mount's tool list changed (a server said so): it is fetched again. */
  toolsChanged?(): void;
  /**
   * Given only to a tool that declares `callsTools` (code mode): calls other
   * mounted tools through the gateway, each under its mount's policy and
   * recorded in the agent's journal under this call's key.
   */
  tools?: ToolCaller;
}

export interface ToolOutput {
  text: string;
  isError?: boolean;
  /** Images the tool returned (base64), after `text`: the runtime stores them and shows them to a model that takes images. */
  images?: ToolImage[];
  /** What the call ended that was held for a time (a machine it released): the runtime counts it in the ledger, the model never sees it. */
  metered?: HeldSpan[];
}

/** A priced resource held from its start to its end (a machine), as the ledger counts it. */
export interface HeldSpan {
  /** Unique to this resource and its start: a span reported twice is counted once. */
  id: string;
  /** Its size, as the ledger groups it: e.g. "1 vCPU, 1024 MiB, 1024 MiB disk". */
  size: string;
  vcpu: number;
  memoryMiB: number;
  diskMiB: number;
  /** ms since the epoch. */
  startedAt: number;
  endedAt: number;
}

/** An image in a tool's output, as pi-ai's image content has it. */
export interface ToolImage {
  type: "image";
  data: string;
  mimeType: string;
}

export interface ToolCaller {
  /**
   * Calls `<alias>__<tool>`. Resolves with the gateway's answer (a refusal, an
   * unknown name and a held call are answers too, `isError` where nothing was
   * performed as asked). Rejects only when the runtime itself could not be
   * reached: the caller should stop, and the call is tried again later.
   */
  call(alias: string, tool: string, args: unknown): Promise<ToolOutput>;
}

/** A mounted tool that a tool with `callsTools` may call, as it is told when the tool list is built. */
export interface CallableTool {
  alias: string;
  tool: string;
  description: string;
  /** The tool's parameters as JSON Schema. */
  parameters: Record<string, unknown>;
  sideEffects: SideEffects;
  /** "approval": a call makes a hold and is answered that it waits for a person. */
  policy: "allow" | "approval";
}

export interface PluginTool<Args = any> {
  name: string;
  description: string;
  parameters: z.ZodType<Args>;
  sideEffects: SideEffects;
  idempotency: Idempotency;
  call(args: Args, ctx: ToolContext): Promise<ToolOutput>;
  /** The JSON Schema the model sees when the tool brings its own (a discovered tool); otherwise it is made from `parameters`. */
  inputSchema?: Record<string, unknown>;
  /** Held for a person even on an open mount, as the plugin's `defaultPolicy` holds a declared tool. */
  defaultPolicy?: "approval";
  /**
   * Why the tool can never be called here (an MCP tool that runs only as a
   * task), completing "<name> …": it is not offered, and a call is refused
   * with this reason whatever the mount's policy says.
   */
  unavailable?: string;
  /**
   * The tool calls other tools through `ctx.tools` (code mode). Given the
   * tools it may call (every mounted tool not denied, except other tools that
   * call tools) and its mount's config, returns its description for the model.
   */
  callsTools?: (callable: CallableTool[], config: Record<string, unknown>) => string;
}

/** What a plugin is given to fetch its mount's tool list: the mount, no call. */
export interface MountContext {
  tenant: string;
  agent: string;
  config: Record<string, unknown>;
  /** The mount's `secret_ref`, resolved now. */
  secret?: string;
  session: SessionState;
}

/** A mount's tool list as its plugin fetched it. */
export interface FetchedTools<Entry = unknown> {
  /** Kept with the mount (as JSON) and handed back to `toolsOf`. */
  entries: Entry[];
  /** Sentences for `status`: what was left out, and why. */
  notes: string[];
}

/**
 * A plugin whose tools come from what it is mounted on (an MCP server's list)
 * rather than from its code. The gateway keeps the fetched list in the mount's
 * session state, says when it is due again (a TTL, a failure's retry, a
 * server's notice that it changed), and builds the tools from it wherever a
 * gateway is made: until a list is known the mount offers no tools.
 */
export interface ToolDiscovery<Entry = any> {
  /** Fetches the list. Runs in a courier, never in the object; a throw is a failure `status` shows, tried again later. */
  fetch(ctx: MountContext): Promise<FetchedTools<Entry>>;
  /** The tools of a fetched list. Called wherever a gateway is built, so it waits on nothing. */
  toolsOf(entries: Entry[], config: Record<string, unknown>): PluginTool[];
  /** How long a fetched list is used before it is fetched again. */
  ttlMs(config: Record<string, unknown>): number;
}

/** What a plugin's standing document is read with. */
export interface StandingContext {
  alias: string;
  config: Record<string, unknown>;
  session: SessionState;
  audience: Audience;
}

/**
 * A document the model always has (memory's notes): the runtime puts it in a
 * conversation's system prompt when the conversation starts (and again after a
 * compaction), and tells the model of later changes in a short note, so the
 * system prompt stays the same request after request.
 */
export interface StandingDocument {
  /** The document's lines as they are now, for a conversation of this audience. */
  lines(ctx: StandingContext): string[];
  /** The lines as the system prompt shows them, within the plugin's own budget. */
  render(lines: string[], ctx: Omit<StandingContext, "session">): string;
}

export interface Plugin {
  name: string;
  description: string;
  /** Its tools, declared; a plugin with `discovery` declares none. */
  tools: PluginTool[];
  /** Tools fetched from what the mount points at (they run in a courier: `runsIn` must be unset). */
  discovery?: ToolDiscovery;
  /**
   * Where its calls run. "object": inside the agent's object, for plugins that
   * only touch the agent's own state (no network, bounded CPU). Otherwise (the
   * default) in a courier, off the object: anything that waits on the network
   * or may run long must never hold up the agent's other conversations.
   */
  runsIn?: "object";
  /** Tools a person must sign even on an otherwise open mount (lifted only by the mount's per-tool entry). */
  defaultPolicy?: Record<string, "approval">;
  standing?: StandingDocument;
  /** Validates the mount's `config`; a bad config is reported at start-up of the pass, by alias. */
  config?: z.ZodType<Record<string, unknown>>;
  /** Its calls leave something running per conversation (a machine), which the runtime holds on a lease and ends. */
  lease?: PluginLease;
}

/** What the runtime's lease knows of a plugin whose calls leave something running (runtime/tools/leases.ts). */
export interface PluginLease {
  /** Ends what the conversation's calls left running (saving what the plugin keeps), and says what it held for how long. Runs in a courier. */
  retire(ctx: LeaseContext): Promise<HeldSpan[]>;
  /** Tools whose call ends it (nothing is held after one). */
  ends: string[];
  /** The tool whose call extends the lease once. */
  postpone: string;
}

/** Whose running thing to end: the mount's conversation, with its config as the plugin parsed it. */
export interface LeaseContext {
  tenant: string;
  agent: string;
  alias: string;
  conversation: string;
  config: Record<string, unknown>;
}
